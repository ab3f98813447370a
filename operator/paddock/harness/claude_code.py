"""harness: claude-code — ``claude -p --output-format stream-json``."""

from __future__ import annotations

import json
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.harness.base import (
    NO_WORKSPACE,
    PROMPT,
    Gate,
    Harness,
    Invocation,
    Request,
    RequestKind,
    WorkspaceContext,
    call_summary,
    command_line,
    control_file,
    gate_command,
    hook_seconds,
    json_object,
    option,
    other,
    own_home,
    session,
    skill_files,
    text_of,
    tool_request,
)
from paddock.runs import events as ev
from paddock.runs.events import Draft

# Claude Code reads its user settings, agents, commands, plugins and memory from its config
# home (``--setting-sources=`` aside); a run's is its own.
# Its transcripts are kept (projects/<the workspace's path>/); not its auto memory, which
# Claude Code writes there too and loads into every later run's prompt as instructions.
HOME = (
    own_home("CLAUDE_CONFIG_DIR", "claude", ("projects",))
    + "export CLAUDE_CODE_DISABLE_AUTO_MEMORY=1\n"
    + 'rm -rf "$CLAUDE_CONFIG_DIR"/projects/*/memory\n'
)


def _argv(spec: AgentRunSpec, *more: str) -> str:
    return command_line(
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        *option("--model", spec.model),
        *option("--resume", spec.session_id),
        *more,
    )


def invocation(spec: AgentRunSpec, workspace: WorkspaceContext = NO_WORKSPACE) -> Invocation:
    """With no policy the pod is the boundary: every tool runs without asking (in -p mode
    Claude Code would refuse its shell and file tools). IS_SANDBOX=1 says so to a Claude Code
    that runs as root (kwok's pods), which otherwise refuses to bypass permissions."""
    return Invocation(
        script=HOME + f"exec {_argv(spec, '--permission-mode', 'bypassPermissions')} < {PROMPT}\n",
        env={"IS_SANDBOX": "1"},
    )


SETTINGS = "claude/settings.json"
INSTRUCTIONS = "claude/instructions.md"
MCP_CONFIG = "claude/mcp.json"
PLUGIN = "claude/plugin"  # the Workspace's agent skills, as a plugin of the run's own
FILE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
WEB_TOOLS = ("WebFetch", "WebSearch")


# Where each tool Paddock gates names its target, and what it asks for.
TOOL_TARGETS: dict[str, tuple[RequestKind, str]] = {
    "Bash": (RequestKind.COMMAND, "command"),
    "Write": (RequestKind.FILE_WRITE, "file_path"),
    "Edit": (RequestKind.FILE_WRITE, "file_path"),
    "MultiEdit": (RequestKind.FILE_WRITE, "file_path"),
    "NotebookEdit": (RequestKind.FILE_WRITE, "notebook_path"),
    "WebFetch": (RequestKind.NETWORK, "url"),
    "WebSearch": (RequestKind.NETWORK, "query"),
}


def _tool_groups(policy: SandboxPolicySpec) -> list[tuple[tuple[str, ...], Decision]]:
    return [(FILE_TOOLS, policy.capabilities.file_write),
            (WEB_TOOLS, policy.capabilities.network)]  # fmt: skip


def permissions(
    policy: SandboxPolicySpec, mcp_servers: tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """The policy as Claude Code's own permission rules. The tools the gate judges (Bash, and
    those the policy asks about) are in neither list: only the gate's answer allows a call
    (its hook output), so a gate that is killed or fails leaves the call to these rules,
    which headless refuse it. The file-writing and web tools the policy allows or denies
    follow fileWrite and network; the Workspace's MCP servers' tools are allowed: the
    platform's choice, run on their servers."""
    allow: list[str] = [f"mcp__{name}" for name in mcp_servers]
    deny: list[str] = []
    for tools, decision in _tool_groups(policy):
        if decision != Decision.ASK:
            (deny if decision == Decision.DENY else allow).extend(tools)
    return {"allow": allow, "deny": deny}


def gated_tools(policy: SandboxPolicySpec) -> list[str]:
    """The tools whose calls go through the gate: Bash, and those the policy asks about."""
    tools = ["Bash"]
    for group, decision in _tool_groups(policy):
        if decision == Decision.ASK:
            tools.extend(group)
    return tools


def gated(
    spec: AgentRunSpec, policy: SandboxPolicySpec, workspace: WorkspaceContext = NO_WORKSPACE
) -> Invocation:
    """Claude Code with a PreToolUse hook that runs the gate (on Bash, and on the tools the
    policy asks about). The settings are the run's own (``--settings``, in the control
    directory), and no other source is read (``--setting-sources=``): a
    ``.claude/settings.json`` the agent writes into the workspace or its HOME, with
    ``disableAllHooks``, is never read; nor is an MCP server but the Workspace's
    (``--strict-mcp-config``). Nor are the workspace's CLAUDE.md, ``.mcp.json`` and
    ``.claude/skills``, so the Workspace's instructions, MCP servers and agent skills come
    from the operator: appended to the system prompt, as ``--mcp-config``, and as a plugin
    of the run's own (``--plugin-dir``)."""
    command = gate_command("claude-code", spec)
    hook = {"type": "command", "command": command, "timeout": hook_seconds(spec)}
    matcher = "|".join(gated_tools(policy))
    settings = {
        "hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [hook]}]},
        "permissions": permissions(policy, tuple(workspace.mcp)),
    }
    files = {SETTINGS: json.dumps(settings)}
    # No setting source but the run's own: the user's settings are as writable by the agent
    # as the workspace's, and persist from one run of the sandbox to the next.
    more = ["--setting-sources=", "--settings", control_file(SETTINGS), "--strict-mcp-config"]
    if workspace.instructions:
        files[INSTRUCTIONS] = workspace.instructions
        more += ["--append-system-prompt-file", control_file(INSTRUCTIONS)]
    if workspace.mcp:
        files[MCP_CONFIG] = json.dumps({"mcpServers": workspace.mcp})
        more += ["--mcp-config", control_file(MCP_CONFIG)]
    if workspace.skills:
        plugin = {"name": "workspace", "description": "The Workspace's skills."}
        files[f"{PLUGIN}/.claude-plugin/plugin.json"] = json.dumps(plugin)
        files |= skill_files(workspace.skills, f"{PLUGIN}/skills")
        more += ["--plugin-dir", control_file(PLUGIN)]
    script = HOME + f"exec {_argv(spec, *more)} < {PROMPT}\n"
    return Invocation(script=script, files=files, gated=True)


def request_of(request: dict[str, Any]) -> Request | None:
    """What a PreToolUse request asks about: ``tool_input.command`` of Bash, the path of a
    file tool, the URL or query of a web tool."""
    return tool_request(request, TOOL_TARGETS)


def _assistant(message: dict[str, Any]) -> list[Draft]:
    drafts = []
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            drafts.append(
                Draft(ev.MESSAGE, block["text"], {"role": "assistant", "text": block["text"]})
            )
        elif kind == "tool_use":
            name, arguments = block.get("name", "?"), block.get("input")
            drafts.append(
                Draft(
                    ev.TOOL_CALL,
                    call_summary(name, arguments),
                    {"id": block.get("id"), "name": name, "input": arguments},
                )
            )
    return drafts


def _user(message: dict[str, Any]) -> list[Draft]:
    drafts = []
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            output = text_of(block.get("content"))
            drafts.append(
                Draft(
                    ev.TOOL_RESULT,
                    output,
                    {
                        "id": block.get("tool_use_id"),
                        "output": output,
                        "isError": bool(block.get("is_error")),
                    },
                )
            )
    return drafts


def _result(event: dict[str, Any]) -> Draft:
    usage = event.get("usage") or {}
    text = event.get("result") or event.get("subtype") or ""
    return Draft(
        ev.RESULT,
        str(text),
        {
            "subtype": event.get("subtype"),
            "isError": bool(event.get("is_error")),
            "text": text,
            "numTurns": event.get("num_turns"),
            "costUsd": event.get("total_cost_usd"),
            "inputTokens": usage.get("input_tokens"),
            "outputTokens": usage.get("output_tokens"),
            "permissionDenials": event.get("permission_denials") or [],
        },
    )


def parse_line(line: str) -> list[Draft]:
    event = json_object(line)
    if isinstance(event, Draft):
        return [event]
    kind, message = event.get("type"), event.get("message") or {}
    if kind == "system" and event.get("subtype") == "init":
        return [session(event.get("session_id"), event.get("model"))]
    if kind == "system":
        subtype = str(event.get("subtype"))
        data = {k: v for k, v in event.items() if k not in ("type", "session_id", "uuid")}
        return [Draft(ev.NOTICE, subtype, data)]
    if kind == "assistant":
        return _assistant(message)
    if kind == "user":
        return _user(message)
    if kind == "result":
        result = _result(event)
        if not result.data["isError"]:
            return [result]
        why = str(event.get("result") or event.get("subtype") or "the run ended in error")
        return [result, Draft(ev.ERROR, why, {"message": why, "subtype": event.get("subtype")})]
    if kind == "error":
        return [Draft(ev.ERROR, str(event.get("error") or event), {"error": event})]
    return [other(str(kind), event)]


HARNESS = Harness("claude-code", invocation, parse_line, Gate(gated, request_of))
