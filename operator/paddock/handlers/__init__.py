"""kopf handlers, one module per kind. Importing this package registers them all."""

from paddock.handlers import agentrun, sandbox, startup, workspace

__all__ = ["agentrun", "sandbox", "startup", "workspace"]
