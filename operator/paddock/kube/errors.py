"""The API server's refusals as Paddock's own errors, so that the client library's
``ApiException`` never leaves ``kube/``: services catch these, and show ``message`` (the
server's own words) in a condition."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

P = ParamSpec("P")
T = TypeVar("T")


class KubeError(Exception):
    """A request the API server refused, or could not be sent."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message


class NoClusterConfigError(KubeError):
    """Neither a pod's service account nor a kubeconfig file says which cluster to talk to."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "NoClusterConfig", message)


class NotFoundError(KubeError):
    """404: the object (or its namespace) does not exist."""


class ConflictError(KubeError):
    """409: the name is taken, or the object changed since it was read."""


class InvalidError(KubeError):
    """422: the server rejected the object; ``message`` says which field and why."""


class ForbiddenError(KubeError):
    """403: RBAC, admission or a quota refused the request."""


_BY_STATUS: dict[int, type[KubeError]] = {
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    422: InvalidError,
}


def from_api_exception(exc: ApiException) -> KubeError:
    """The error for a response; its message is the Status object's, when the body has one."""
    status = int(exc.status or 0)
    reason = str(exc.reason or "")
    message = reason
    try:
        body = json.loads(exc.body or "")
        if isinstance(body, dict) and body.get("message"):
            message = str(body["message"])
    except (TypeError, ValueError):
        pass
    return _BY_STATUS.get(status, KubeError)(status, reason, message)


@contextmanager
def converted() -> Iterator[None]:
    # Imported here, not at the top: the CLI catches these errors without loading the client
    # library (a second of start-up) for commands that never reach a cluster.
    from kubernetes.client.exceptions import ApiException

    try:
        yield
    except ApiException as exc:
        raise from_api_exception(exc) from exc


def converting(function: Callable[P, T]) -> Callable[P, T]:
    """Decorate a client function so that it raises ``KubeError``, never ``ApiException``."""

    @wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with converted():
            return function(*args, **kwargs)

    return wrapper
