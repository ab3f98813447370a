"""What the object store answers, as Paddock's own errors: each message says what failed and
why in words a person acts on, and never carries a credential."""

from __future__ import annotations


class ObjectStoreError(Exception):
    """The object store refused a request or could not be reached."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ObjectExistsError(ObjectStoreError):
    """An object that was to be created exists already (another writer was first)."""


class ObjectStoreDeniedError(ObjectStoreError):
    """The store refused the credentials or their access (HTTP 401/403)."""


class ObjectStoreNotFoundError(ObjectStoreError):
    """The bucket or the object does not exist."""


class ObjectStoreUnavailableError(ObjectStoreError):
    """The store did not answer (down, unreachable, timing out)."""
