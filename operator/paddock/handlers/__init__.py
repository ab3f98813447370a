"""kopf handlers, one module per kind. Importing this package registers them all."""

from paddock.handlers import sandbox, startup, workspace

__all__ = ["sandbox", "startup", "workspace"]
