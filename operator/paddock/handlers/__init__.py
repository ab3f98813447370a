"""kopf handlers, one module per kind. Importing this package registers them all."""

from paddock.handlers import (
    agentrun,
    fences,
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
    "fences",
    "network",
    "policy",
    "pool",
    "sandbox",
    "snapshots",
    "startup",
    "workspace",
]
