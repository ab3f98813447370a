"""harness: codex — ``codex exec --json``, the prompt on stdin."""

from __future__ import annotations

from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import SandboxPolicySpec
from paddock.harness.base import (
    NO_WORKSPACE,
    PROMPT,
    WORKSPACE,
    Gate,
    Harness,
    Invocation,
    Request,
    RequestKind,
    ShellWord,
    WorkspaceContext,
    call_summary,
    command_line,
    gate_command,
    json_object,
    option,
    other,
    own_home,
    session,
    tool_request,
)
from paddock.harness.models import codex_options
from paddock.render.projections import mcp_url_env, toml_value
from paddock.runs import events as ev
from paddock.runs.events import Draft

# Codex loads ``$CODEX_HOME/.env`` into its environment at start, and its config, hooks, rules
# and skills from there: a run's is its own.
HOME = own_home("CODEX_HOME", "codex", ("sessions", "archived_sessions"))


def _argv(spec: AgentRunSpec, *more: str) -> str:
    resume = ("resume", spec.session_id) if spec.session_id else (None, None)
    return command_line(
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-C",
        WORKSPACE,
        *option("-m", spec.model),
        *more,
        *resume,
        "-",
    )


def provider_options(spec: AgentRunSpec, workspace: WorkspaceContext) -> list[str]:
    """Codex's provider: the egress gateway's model route when the gateway holds the key,
    else the run's ``OPENAI_BASE_URL`` (which Codex itself ignores), with the key from
    whichever of ``CODEX_API_KEY`` and ``OPENAI_API_KEY`` the run has; else Codex's own."""
    if workspace.model_url:
        return codex_options(f"{workspace.model_url}/v1")
    given = {variable.name: variable.value for variable in spec.env}
    url = given.get("OPENAI_BASE_URL")
    if not url:
        return []
    names = set(given) | {secret.name for secret in spec.secrets}
    key = "OPENAI_API_KEY" if "OPENAI_API_KEY" in names - {"CODEX_API_KEY"} else "CODEX_API_KEY"
    return codex_options(url, key)


def mcp_options(spec: AgentRunSpec, workspace: WorkspaceContext) -> list[str]:
    """The Workspace's MCP servers as config overrides (``-c``): Codex reads a project's
    ``.codex/config.toml`` only in a project it trusts, and the workspace is not one. With
    them, the run's provider (``provider_options``)."""
    options = provider_options(spec, workspace)
    for name, server in workspace.mcp.items():
        for key, value in server.items():
            if key == "url":  # the run's, from its environment (its route, with a gateway)
                url = f'"mcp_servers.{name}.url=\\"${{{mcp_url_env(name)}}}\\""'
                options += ["-c", ShellWord(url)]
            else:
                options += ["-c", f"mcp_servers.{name}.{key}={toml_value(value)}"]
    return options


def invocation(spec: AgentRunSpec, workspace: WorkspaceContext = NO_WORKSPACE) -> Invocation:
    """With no policy the pod is the boundary: no approvals and no sandbox of Codex's own
    (codex exec is read-only by default, and its sandbox needs kernel features a container
    often lacks)."""
    more = ["--dangerously-bypass-approvals-and-sandbox", *mcp_options(spec, workspace)]
    return Invocation(script=HOME + f"exec {_argv(spec, *more)} < {PROMPT}\n")


def hook(spec: AgentRunSpec) -> str:
    """The PreToolUse hook as a config override (``-c``): a session flag, which no config
    file overrides. Codex runs hooks only from reviewed ("trusted") sources unless told not
    to check; Paddock writes this one itself. Codex names its exec_command tool Bash in a
    hook's request, and its file edits ``apply_patch`` (the patch as ``command``). No
    timeout: Codex waits for the hook (the gate has its own)."""
    command = toml_value(gate_command("codex", spec))
    return (
        'hooks.PreToolUse=[{matcher="^(Bash|apply_patch)$", '
        f'hooks=[{{type="command", command={command}}}]}}]'
    )


# Codex's own sandbox (bubblewrap) needs user namespaces, which a container at the restricted
# Pod Security level does not get: with it every command fails. Under the gate it is off; the
# gate judges every command, and the pod is the boundary, as for the other CLIs.
NO_OWN_SANDBOX = ["-c", 'sandbox_mode="danger-full-access"']


def gated(
    spec: AgentRunSpec, policy: SandboxPolicySpec, workspace: WorkspaceContext = NO_WORKSPACE
) -> Invocation:
    """Codex with a PreToolUse hook on its shell tool and its file edits (``apply_patch``)
    that runs the gate (hooks switched on by a session flag too, so a config file that
    switches them off changes nothing). The policy reaches Codex through the gate alone: a
    command as a command, a patch as a write of each file it names."""
    del policy  # judged by the gate
    more = [
        "--dangerously-bypass-hook-trust",
        "-c",
        "features.codex_hooks=true",
        *NO_OWN_SANDBOX,
        *mcp_options(spec, workspace),
    ]
    return Invocation(
        script=HOME + f"exec {_argv(spec, *more, '-c', hook(spec))} < {PROMPT}\n", gated=True
    )


def request_of(request: dict[str, Any]) -> Request | None:
    """The command of a PreToolUse request for Bash (``tool_input.command``), or the files a
    patch of ``apply_patch`` writes (the patch is its ``tool_input.command``)."""
    asked = tool_request(request, {"Bash": (RequestKind.COMMAND, "command"),
                                   "apply_patch": (RequestKind.FILE_WRITE, "command")})  # fmt: skip
    if asked is None or asked.kind == RequestKind.COMMAND:
        return asked
    writes = patch_writes(asked.target)
    return None if writes is None else Request(asked.kind, asked.target, writes=writes)


# The lines of a Codex patch (codex-rs apply-patch) that name a file it writes, and the others
# that begin with "***".
PATCH_HEADERS = ("*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: ")
PATCH_MARKS = ("*** Begin Patch", "*** End Patch", "*** End of File")


def patch_writes(patch: str) -> tuple[str, ...] | None:
    """Each path a patch of Codex's ``apply_patch`` writes (adds, deletes, updates or moves a
    file to), or None (not read, so refused) for a patch that names none, or that has a line
    starting with "***" that is none of its headers and marks. Lines are split and trimmed at
    least where Codex splits and trims them (Python's line ends and white space are more than
    Rust's), so every header Codex reads is read here."""
    paths = []
    for line in patch.splitlines():
        text = line.strip()
        if not text.startswith("***") or text in PATCH_MARKS:
            continue
        header = next((h for h in PATCH_HEADERS if text.startswith(h)), None)
        if header is None:
            return None
        paths.append(text.removeprefix(header))
    return tuple(paths) or None


def _call(item: dict[str, Any]) -> Draft | None:
    kind, item_id = item.get("type"), item.get("id")
    if kind == "command_execution":
        command = item.get("command")
        return Draft(
            ev.TOOL_CALL,
            call_summary("shell", {"command": command}),
            {"id": item_id, "name": "shell", "input": {"command": command}},
        )
    if kind == "mcp_tool_call":
        name = f"{item.get('server')}/{item.get('tool')}"
        return Draft(
            ev.TOOL_CALL,
            call_summary(name, item.get("arguments")),
            {"id": item_id, "name": name, "input": item.get("arguments")},
        )
    if kind == "web_search":
        return Draft(
            ev.TOOL_CALL,
            call_summary("web_search", {"query": item.get("query")}),
            {"id": item_id, "name": "web_search", "input": {"query": item.get("query")}},
        )
    return None


def _completed(item: dict[str, Any]) -> list[Draft]:
    kind, item_id = item.get("type"), item.get("id")
    if kind == "agent_message":
        text = str(item.get("text", ""))
        return [Draft(ev.MESSAGE, text, {"role": "assistant", "text": text})]
    if kind == "command_execution":
        output, code = str(item.get("aggregated_output", "")), item.get("exit_code")
        return [
            Draft(
                ev.TOOL_RESULT,
                output or f"exit {code}",
                {
                    "id": item_id,
                    "name": "shell",
                    "output": output,
                    "exitCode": code,
                    "isError": code not in (0, None) or item.get("status") == "failed",
                },
            )
        ]
    if kind == "file_change":
        changes = item.get("changes") or []
        paths = ", ".join(str(c.get("path")) for c in changes if isinstance(c, dict))
        return [
            Draft(
                ev.TOOL_RESULT,
                f"files: {paths}",
                {
                    "id": item_id,
                    "name": "apply_patch",
                    "changes": changes,
                    "isError": item.get("status") == "failed",
                },
            )
        ]
    if kind == "mcp_tool_call":
        return [
            Draft(
                ev.TOOL_RESULT,
                str(item.get("status", "")),
                {
                    "id": item_id,
                    "name": f"{item.get('server')}/{item.get('tool')}",
                    "output": item.get("result"),
                    "isError": item.get("status") == "failed",
                },
            )
        ]
    if kind == "error":
        message = str(item.get("message", ""))
        return [Draft(ev.ERROR, message, {"message": message})]
    if kind == "reasoning":
        return []
    return [other(f"item.{kind}", item)]


def parse_line(line: str) -> list[Draft]:
    event = json_object(line)
    if isinstance(event, Draft):
        return [event]
    kind, item = event.get("type"), event.get("item") or {}
    if kind == "thread.started":
        return [session(event.get("thread_id"))]
    if kind == "turn.started":
        return []
    if kind == "item.started":
        call = _call(item)
        return [call] if call else []
    if kind == "item.completed":
        return _completed(item)
    if kind == "item.updated":
        return []
    if kind == "turn.completed":
        usage = event.get("usage") or {}
        return [
            Draft(
                ev.RESULT,
                "turn completed",
                {
                    "isError": False,
                    "inputTokens": usage.get("input_tokens"),
                    "outputTokens": usage.get("output_tokens"),
                    "cachedInputTokens": usage.get("cached_input_tokens"),
                },
            )
        ]
    if kind in ("turn.failed", "error"):
        error = event.get("error") or {}
        message = (
            str(error.get("message") if isinstance(error, dict) else error)
            if error
            else str(event.get("message", ""))
        )
        return [Draft(ev.ERROR, message, {"message": message, "harnessEvent": kind})]
    return [other(str(kind), event)]


HARNESS = Harness("codex", invocation, parse_line, Gate(gated, request_of))
