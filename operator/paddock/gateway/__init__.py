"""The egress gateway: Squid and Paddock's helper beside it (a host name judged by the
Sandbox's policy, the model route that holds the key, the meter of what a run spends). A
service of its own: it reads the API through kube/ and never imports the operator's."""
