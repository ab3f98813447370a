"""Who a tool call acts for, and whether they may do what it touches.

Over stdio the server acts with the kubeconfig of the person who started it, and the API server
decides each request (``Caller(None)``: nothing to check here). Over HTTP it acts with its own
identity for callers who present a bearer token: the token's identity (TokenReview) is asked
about each verb and resource a tool touches (SubjectAccessReview) before the tool touches it,
so a caller does through MCP exactly what their identity may do with kubectl."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.mcpserver.exceptions import ToolError

from paddock import GROUP
from paddock.kube import review
from paddock.kube.review import Identity


class ToolRefusedError(ToolError):
    """A tool call that cannot be done: its message is what the caller is told (as an
    ``isError`` result)."""


# Each resource a tool touches: (API group, plural).
SANDBOXES = (GROUP, "sandboxes")
AGENTRUNS = (GROUP, "agentruns")
POLICIES = (GROUP, "sandboxpolicies")
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
        """Refuse (``ToolRefusedError``) what the caller's identity may not do."""
        if self.identity is None:
            return
        group, plural = resource
        allowed, why = review.allowed(
            self.identity, verb, plural, namespace, group=group, name=name, subresource=subresource
        )
        if not allowed:
            what = f"{plural}/{subresource}" if subresource else plural
            because = f": {why}" if why else ""
            raise ToolRefusedError(
                f"forbidden: {self.identity.username} may not {verb} {what} in namespace "
                f"{namespace}{because}"
            )
