"""A local Kubernetes cluster for tests and ``make dev``, built without Docker: Paddock's
development tooling, a distribution of its own (``paddock-dev``, devtools/pyproject.toml) that
the operator's image does not hold. It adds ``paddock cluster`` and ``paddock dev`` to the
``paddock`` command through the ``paddock.commands`` entry points (commands.py); the operator's
package never imports it.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as local processes, and
kwok stands in for the kubelet: it moves pods through their lifecycle and runs ``pods/exec``
requests as local processes in a per-pod working directory. That directory is NOT a container:
there is no isolation between a "pod" and the host. It is a test double for the node only; the
API server, admission, RBAC, garbage collection and scheduling are all real.
"""
