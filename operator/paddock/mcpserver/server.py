"""The MCP server: the user-side operations of ``paddock.client`` as tools on the official
SDK, over stdio (``paddock mcp``: the tools act with the kubeconfig of the person who runs it)
or streamable HTTP (``paddock mcp --http ADDR``: each caller presents a bearer token, checked
with TokenReview, and each call is authorised for its identity with SubjectAccessReview)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from paddock import __version__, serving
from paddock.api.approvals import ApprovalChoice
from paddock.client import approvals, runs, sandboxes
from paddock.client.access import Caller, RefusedError, TokenIdentities
from paddock.kube import client as kube
from paddock.kube.errors import KubeError
from paddock.kube.review import Identity
from paddock.objectstore.errors import ObjectStoreError

Obj = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])
INSTRUCTIONS = (
    "Paddock's sandboxes (isolated, prepared workspaces in Kubernetes pods) and agent runs. "
    "exec runs a shell command in a Ready sandbox, checked by its SandboxPolicy; files are "
    "read and written under /workspace. Every call acts with the caller's Kubernetes identity."
)


class TokenReviewVerifier:
    """Bearer tokens checked with the API server's TokenReview; identities cached briefly (by
    the token's hash, never the token itself)."""

    def __init__(self) -> None:
        self._identities = TokenIdentities()

    async def verify_token(self, token: str) -> AccessToken | None:
        import anyio.to_thread

        identity = await anyio.to_thread.run_sync(self._identities.identity, token)
        if identity is None:
            return None
        claims = {"uid": identity.uid, "groups": list(identity.groups), "extra": identity.extra}
        return AccessToken(
            token=token, client_id=identity.username, scopes=[], subject=identity.username,
            claims=claims,
        )  # fmt: skip


def current_caller(http: bool) -> Caller:
    """The caller of this tool call: over HTTP the token's identity, over stdio the
    kubeconfig's (checked by the API server itself)."""
    if not http:
        return Caller(None)
    token = get_access_token()
    if token is None or not token.subject:
        raise ToolError("unauthenticated: present a Kubernetes bearer token")
    claims = token.claims or {}
    identity = Identity(
        username=token.subject,
        uid=str(claims.get("uid") or ""),
        groups=tuple(claims.get("groups") or ()),
        extra=dict(claims.get("extra") or {}),
    )
    return Caller(identity)


def _answering(function: F) -> F:
    """A refused operation, or a refusal of the API server or the object store, is the tool's
    error, in its words."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except RefusedError as exc:
            raise ToolError(str(exc)) from None
        except KubeError as exc:
            raise ToolError(f"the API server refused: {exc.message}") from None
        except ObjectStoreError as exc:
            raise ToolError(f"the run's log could not be read: {exc.message}") from None

    return wrapper  # type: ignore[return-value]


class Tools:
    """The tools as the server offers them: each names its arguments (the SDK makes its JSON
    schema from them) and acts for the caller of the call, in ``namespace`` when it names
    none."""

    def __init__(self, namespace: str, http: bool) -> None:
        self.namespace = namespace
        self.http = http

    def caller(self) -> Caller:
        return current_caller(self.http)

    def ns(self, given: str | None) -> str:
        return given or self.namespace

    @_answering
    def list_sandboxes(self, namespace: str | None = None) -> list[Obj]:
        """The Sandboxes of a namespace: name, workspace, phase, policy, conditions."""
        return sandboxes.list_sandboxes(self.caller(), self.ns(namespace))

    @_answering
    def get_sandbox(self, name: str, namespace: str | None = None) -> Obj:
        """One Sandbox: its phase, reason, message, policy and conditions."""
        return sandboxes.get_sandbox(self.caller(), self.ns(namespace), name)

    @_answering
    def create_sandbox(
        self, name: str, workspace: str, policy: str | None = None, namespace: str | None = None
    ) -> Obj:
        """Create a Sandbox of a Workspace (optionally under a named SandboxPolicy); it is
        prepared in the background: get_sandbox says when it is Ready."""
        return sandboxes.create_sandbox(self.caller(), self.ns(namespace), name, workspace, policy)

    @_answering
    def delete_sandbox(self, name: str, namespace: str | None = None) -> Obj:
        """Delete a Sandbox, with its pod and workspace volume."""
        return sandboxes.delete_sandbox(self.caller(), self.ns(namespace), name)

    @_answering
    def pause_sandbox(self, name: str, namespace: str | None = None) -> Obj:
        """Pause a Sandbox: its pod is deleted, its workspace volume kept."""
        return sandboxes.set_paused(self.caller(), self.ns(namespace), name, True)

    @_answering
    def resume_sandbox(self, name: str, namespace: str | None = None) -> Obj:
        """Resume a paused Sandbox on its volume, without setup."""
        return sandboxes.set_paused(self.caller(), self.ns(namespace), name, False)

    @_answering
    def exec_(
        self, sandbox: str, command: str, timeout_seconds: int = 300, namespace: str | None = None
    ) -> Obj:
        """Run a shell command in a Ready sandbox, checked first by its SandboxPolicy (a
        denied command never runs, and the error names the rule): its stdout, stderr and
        exit code. A command the policy says to ask about does not run yet: the result is
        a pendingApproval (the run and request id to approve or deny)."""
        return runs.exec_command(
            self.caller(), self.ns(namespace), sandbox, command, timeout_seconds
        )

    @_answering
    def read_file(
        self, sandbox: str, path: str, max_bytes: int = 1048576, namespace: str | None = None
    ) -> Obj:
        """Read a text file of the sandbox's workspace (a path relative to /workspace; at most
        1 MiB): its size, content, and whether the content was cut short."""
        return sandboxes.read_file(self.caller(), self.ns(namespace), sandbox, path, max_bytes)

    @_answering
    def write_file(
        self, sandbox: str, path: str, content: str, namespace: str | None = None
    ) -> Obj:
        """Write a text file in the sandbox's workspace (at most 1 MiB; its directories made),
        as the sandbox's policy for file writes allows."""
        return sandboxes.write_file(self.caller(), self.ns(namespace), sandbox, path, content)

    @_answering
    def list_files(self, sandbox: str, path: str = ".", namespace: str | None = None) -> Obj:
        """The entries of a directory of the sandbox's workspace: name, type and size."""
        return sandboxes.list_files(self.caller(), self.ns(namespace), sandbox, path)

    @_answering
    def start_run(
        self,
        harness: str,
        prompt: str | None = None,
        command: str | None = None,
        sandbox: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
        namespace: str | None = None,
        deliver: str | None = None,
        branch: str | None = None,
        pull_request: bool = False,
        base: str | None = None,
        title: str | None = None,
        draft: bool = False,
        forge: str | None = None,
        deliver_always: bool = False,
    ) -> Obj:
        """Start an AgentRun: an agent harness (claude-code, codex, opencode, gemini) with a
        prompt, or harness command with a command; in an existing sandbox, or a fresh one of
        a workspace. Returns the run; read_events follows it.

        deliver (a Secret, NAME or NAME:KEY, holding a forge token) pushes the run's work to
        a new branch (branch: a template with {run}, {thread}, {id}; default paddock/{run});
        pull_request opens a pull request (base, title, draft); forge is github, gitlab or
        gitea (default: told from the host); deliver_always delivers however the run ended.
        The operator pushes: the token never enters the sandbox."""
        delivering = None
        if deliver is not None:
            delivering = runs.Delivering(deliver, branch, pull_request, base, title, draft,
                                         forge, deliver_always)  # fmt: skip
        elif any((branch, pull_request, base, title, draft, forge, deliver_always)):
            raise RefusedError("branch, pull_request, base, title, draft, forge and "
                               "deliver_always go with deliver (the token's Secret)")  # fmt: skip
        return runs.start_run(
            self.caller(), self.ns(namespace), harness, prompt, command, sandbox, workspace,
            model, delivering,
        )  # fmt: skip

    @_answering
    def get_run(self, name: str, namespace: str | None = None) -> Obj:
        """One AgentRun: phase, reason, message, exit code, event count, approvals (each
        pending one's text whole, invisible and bidirectional characters shown as code
        points, and its digest, which approve names)."""
        return runs.get_run(self.caller(), self.ns(namespace), name)

    @_answering
    def read_events(
        self, name: str, from_seq: int = 0, wait_seconds: int = 0, namespace: str | None = None
    ) -> Obj:
        """A run's normalised events from a seq (at most 500); with wait_seconds, waits that
        long for new ones when there are none yet. nextSeq is where to read on from; ended
        says the run is over and every event was read."""
        return runs.read_events(self.caller(), self.ns(namespace), name, from_seq, wait_seconds)

    @_answering
    def cancel_run(self, name: str, namespace: str | None = None) -> Obj:
        """Cancel a run: its processes are killed and it ends Cancelled."""
        return runs.cancel_run(self.caller(), self.ns(namespace), name)

    @_answering
    def approve(
        self,
        run: str,
        digests: dict[str, str],
        always: bool = False,
        namespace: str | None = None,
    ) -> Obj:
        """Approve a run's pending approval requests: digests names each request (its id)
        and the digest of the text approved, as get_run or exec's pendingApproval showed it
        (refused, and nothing decided, if a request holds other text); always: also later
        requests of the same rules, for the rest of the run. Returns each approved text
        whole, invisible and bidirectional characters shown as code points (⟦U+202E⟧)."""
        choice = ApprovalChoice.ALWAYS if always else ApprovalChoice.APPROVE
        if not digests:
            raise RefusedError("name each request to approve with the digest of its text")
        return approvals.decide(self.caller(), self.ns(namespace), run, list(digests), choice,
                                shown=digests)  # fmt: skip

    @_answering
    def deny(self, run: str, ids: list[str] | None = None, namespace: str | None = None) -> Obj:
        """Deny a run's pending approval requests (by id; none given: the only one pending)."""
        denied = ApprovalChoice.DENY
        return approvals.decide(self.caller(), self.ns(namespace), run, ids or [], denied)


# Each tool's name, and the method that serves it.
SERVED = {
    "list_sandboxes": "list_sandboxes", "get_sandbox": "get_sandbox",
    "create_sandbox": "create_sandbox", "delete_sandbox": "delete_sandbox",
    "pause_sandbox": "pause_sandbox", "resume_sandbox": "resume_sandbox", "exec": "exec_",
    "read_file": "read_file", "write_file": "write_file", "list_files": "list_files",
    "start_run": "start_run", "get_run": "get_run", "read_events": "read_events",
    "cancel_run": "cancel_run", "approve": "approve", "deny": "deny",
}  # fmt: skip


def build(namespace: str, http_url: str | None = None) -> MCPServer:
    """The server, its tools defaulting to ``namespace``; with ``http_url`` (the URL callers
    reach it at), bearer tokens are required."""
    http = http_url is not None
    auth = None
    verifier = None
    if http_url is not None:
        auth = AuthSettings(
            issuer_url=kube.server_url(), resource_server_url=http_url, required_scopes=None
        )
        verifier = TokenReviewVerifier()
    server = MCPServer(
        "paddock",
        instructions=INSTRUCTIONS,
        version=__version__,
        token_verifier=verifier,
        auth=auth,
    )
    served = Tools(namespace, http)
    for name, method in SERVED.items():
        server.add_tool(getattr(served, method), name=name)
    return server


def serve(namespace: str, http: str | None = None, tls: tuple[str, str] | None = None) -> None:
    """Serve over stdio, or over streamable HTTP at ``http`` (HOST:PORT, port 0 for any free
    one) under /mcp; with ``tls`` (a certificate and its key, PEM files), over HTTPS, so that
    callers' tokens never cross the network in the clear."""
    if http is None:
        build(namespace).run()
        return

    def app_at(host: str, url: str) -> tuple[Any, str]:
        server = build(namespace, url)
        return server.streamable_http_app(host=host), server.settings.log_level.lower()

    serving.serve("paddock mcp", http, tls, app_at, path="/mcp")
