"""kopf handlers, one module per concern. Importing this package registers them all."""

from paddock.handlers import startup

__all__ = ["startup"]
