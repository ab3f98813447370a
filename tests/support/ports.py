"""Ports for the servers the tests start.

Each pytest-xdist worker takes its own share of two ranges below the kernel's ephemeral range:
one for the local clusters it starts (``PADDOCK_CLUSTER_PORTS``) and one for the tests' own
servers. A port chosen here and let go until its server binds it can therefore be taken by no
other worker, no cluster, no outgoing connection and no server that asked for port 0."""

from __future__ import annotations

import os

from paddock_dev import processes

CLUSTERS = range(10000, 20000)
SERVERS = range(20000, 30000)  # below Kubernetes' NodePorts (30000-32767) too


def worker_share(ports: range) -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw"))
    size = len(ports) // count
    return range(ports.start + index * size, ports.start + (index + 1) * size)


def free_ports(*names: str) -> dict[str, int]:
    """Distinct ports nothing is bound to, that this worker offers no one else meanwhile."""
    return processes.free_ports(names, worker_share(SERVERS))


def free_port() -> int:
    return free_ports("port")["port"]


def share_for_clusters() -> str:
    """This worker's share of the clusters' range, as ``PADDOCK_CLUSTER_PORTS`` reads it."""
    share = worker_share(CLUSTERS)
    return f"{share.start}-{share[-1]}"
