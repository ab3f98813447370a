"""kopf handlers, one module per kind. Importing this package registers them all."""

from paddock.handlers import (
    agentrun,
    network,
    policy,
    pool,
    sandbox,
    snapshots,
    startup,
    workspace,
)

__all__ = [
    "agentrun",
    "network",
    "policy",
    "pool",
    "sandbox",
    "snapshots",
    "startup",
    "workspace",
]
