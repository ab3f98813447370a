"""Who a bearer token is, and what they may do: the API server's TokenReview and
SubjectAccessReview, so that a server acting for callers (``paddock mcp --http``) lets each do
exactly what their own identity may do with kubectl."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from paddock.kube.client import _client
from paddock.kube.errors import converting


@dataclass(frozen=True)
class Identity:
    """A caller as the API server knows them."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


@converting
def token_identity(token: str) -> Identity | None:
    """The identity of a bearer token (None: the API server does not accept it)."""
    review: Any = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    answer: Any = client.AuthenticationV1Api(_client()).create_token_review(review)
    status = answer.status
    if not status or not status.authenticated or not status.user:
        return None
    user = status.user
    return Identity(
        username=str(user.username),
        uid=str(user.uid or ""),
        groups=tuple(user.groups or ()),
        extra={key: list(values) for key, values in (user.extra or {}).items()},
    )


@converting
def allowed(
    who: Identity,
    verb: str,
    resource: str,
    namespace: str,
    *,
    group: str = "",
    name: str = "",
    subresource: str = "",
) -> tuple[bool, str]:
    """Whether ``who`` may ``verb`` the resource, as RBAC (or whatever authorizer the cluster
    runs) decides; and the authorizer's reason, if it gave one."""
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace}
    if name:
        attributes["name"] = name
    if subresource:
        attributes["subresource"] = subresource
    review: Any = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": who.username,
            "uid": who.uid,
            "groups": list(who.groups),
            "extra": who.extra,
            "resourceAttributes": attributes,
        },
    }
    answer: Any = client.AuthorizationV1Api(_client()).create_subject_access_review(review)
    status = answer.status
    return bool(status and status.allowed), str((status and status.reason) or "")
