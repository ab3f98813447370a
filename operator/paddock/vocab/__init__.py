"""The words every package shares, on the ground floor: the names, labels and annotations of
what the operator makes (names.py), owner references (ownership.py) and the network ranges a
sandbox's fence and the gateway treat as internal (networks.py). Imports nothing of Paddock's
but its API group."""
