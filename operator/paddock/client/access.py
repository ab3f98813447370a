"""Who an operation acts for, and whether they may do what it touches.

The CLI, and the MCP server over stdio, act with the kubeconfig of the person who started them,
and the API server decides each request (``Caller(None)``: nothing to check here). The MCP
server over HTTP and the web console act with their own identity for callers who present a
bearer token: the token's identity (TokenReview) is asked about each verb and resource an
operation touches (SubjectAccessReview) before it touches it, so a caller does through them
exactly what their identity may do with kubectl."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

from paddock import GROUP
from paddock.kube import review
from paddock.kube.errors import KubeError
from paddock.kube.review import Identity


class RefusedError(Exception):
    """An operation that cannot be done: its message is what the caller is told."""


class MissingError(RefusedError):
    """What the operation names does not exist."""


# Each resource an operation touches: (API group, plural).
SANDBOXES = (GROUP, "sandboxes")
AGENTRUNS = (GROUP, "agentruns")
POLICIES = (GROUP, "sandboxpolicies")
POOLS = (GROUP, "sandboxpools")
WORKSPACES = (GROUP, "workspaces")
CONFIGMAPS = ("", "configmaps")
PODS_EXEC = ("", "pods")


@dataclass(frozen=True)
class Caller:
    identity: Identity | None  # None: the kubeconfig's own, which the API server checks

    def may(
        self,
        verb: str,
        resource: tuple[str, str],
        namespace: str,
        name: str = "",
        subresource: str = "",
    ) -> None:
        """Refuse (``RefusedError``) what the caller's identity may not do."""
        if self.identity is None:
            return
        group, plural = resource
        allowed, why = review.allowed(
            self.identity, verb, plural, namespace, group=group, name=name, subresource=subresource
        )
        if not allowed:
            what = f"{plural}/{subresource}" if subresource else plural
            because = f": {why}" if why else ""
            raise RefusedError(
                f"forbidden: {self.identity.username} may not {verb} {what} in namespace "
                f"{namespace}{because}"
            )

    def allows(self, verb: str, resource: tuple[str, str], namespace: str, name: str = "") -> bool:
        """Whether the caller may do it (what a face offers them; ``may`` still checks the
        doing). Over the kubeconfig's own identity: offered, and the API server decides."""
        try:
            self.may(verb, resource, namespace, name)
        except RefusedError:
            return False
        return True

    @property
    def username(self) -> str | None:
        return None if self.identity is None else self.identity.username


TOKEN_CACHE_SECONDS = 60.0  # how long a reviewed token's identity is trusted without asking again


class TokenIdentities:
    """Bearer tokens' identities, asked of the API server (TokenReview) and kept briefly by the
    token's hash, never the token itself."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float, Identity]] = {}
        self._lock = threading.Lock()

    def identity(self, token: str, *, fresh: bool = False) -> Identity | None:
        """Whom ``token`` authenticates, or None (not a token the API server accepts);
        ``fresh``: asked of the API server now, whatever is kept."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if not fresh and seen is not None and now - seen[0] < TOKEN_CACHE_SECONDS:
                return seen[1]
        try:
            identity = review.token_identity(token)
        except KubeError:
            return None
        if identity is not None:
            with self._lock:
                self._seen = {
                    k: v for k, v in self._seen.items() if now - v[0] < TOKEN_CACHE_SECONDS
                }
                self._seen[key] = (now, identity)
        return identity
