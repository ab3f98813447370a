"""A local Kubernetes cluster for tests and ``make dev``, built without Docker.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as local processes, and
kwok stands in for the kubelet: it moves pods through their lifecycle and runs ``pods/exec``
requests as local processes in a per-pod working directory. That directory is NOT a container:
there is no isolation between a "pod" and the host. It is a test double for the node only; the
API server, admission, RBAC, garbage collection and scheduling are all real.
"""
