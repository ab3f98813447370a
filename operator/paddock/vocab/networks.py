"""The address ranges Paddock treats as internal: a sandbox's fence leaves them out of
``network: allow`` (the cluster's and every private network's), and the gateway refuses them
as destinations."""

# "Internet" excludes what an agent must not reach by default: private and cluster-internal
# ranges (pods, services, nodes) and link-local addresses, which hold the cloud metadata
# service (169.254.169.254).

PRIVATE_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
PRIVATE_V6 = ("fc00::/7", "fe80::/10")
