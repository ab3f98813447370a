"""harness: gemini — ``gemini -p --output-format stream-json``."""

from __future__ import annotations

import json
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.harness.base import (
    GATE_COMMAND,
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
    gate_seconds,
    hook_seconds,
    json_object,
    option,
    other,
    run_file,
    session,
    skill_lines,
    tool_request,
)
from paddock.render import run_scripts
from paddock.runs import events as ev
from paddock.runs.events import Draft

SETTINGS = "gemini-settings.json"
POLICY_FILE = "gemini-policy.toml"
FILE_TOOLS = ("write_file", "replace")
WEB_TOOLS = ("web_fetch", "google_web_search")
# Where each tool Paddock gates names its target, and what it asks for.
TOOL_TARGETS: dict[str, tuple[RequestKind, str]] = {
    "run_shell_command": (RequestKind.COMMAND, "command"),
    "write_file": (RequestKind.FILE_WRITE, "file_path"),
    "replace": (RequestKind.FILE_WRITE, "file_path"),
    "web_fetch": (RequestKind.NETWORK, "prompt"),
    "google_web_search": (RequestKind.NETWORK, "query"),
}
# Gemini CLI reads user settings from $GEMINI_CLI_HOME/.gemini, else $HOME/.gemini (the
# sandbox's home, Paddock's own emptyDir): the run's settings are copied there at launch.
USER_SETTINGS = '"${GEMINI_CLI_HOME:-$HOME}/.gemini"'


def _argv(spec: AgentRunSpec, *more: str) -> str:
    return command_line(
        "gemini",
        "--output-format",
        "stream-json",
        "--skip-trust",
        *more,
        *option("-m", spec.model),
        *option("--resume", spec.session_id),
    )


def _auth(spec: AgentRunSpec) -> dict[str, Any]:
    """Gemini CLI 0.61 refuses to start headless without an auth type in its settings: the
    API key's, when the run has GEMINI_API_KEY (Vertex AI's with GOOGLE_GENAI_USE_VERTEXAI)."""
    names = {e.name for e in spec.env} | {s.name for s in spec.secrets}
    if "GOOGLE_GENAI_USE_VERTEXAI" in names:
        return {"security": {"auth": {"selectedType": "vertex-ai"}}}
    if "GEMINI_API_KEY" in names:
        return {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    return {}


def _script(spec: AgentRunSpec, settings: dict[str, Any], *more: str) -> tuple[str, str]:
    script = (
        f"mkdir -p {USER_SETTINGS}\n"
        f"cp {run_file(SETTINGS)} {USER_SETTINGS}/settings.json\n"
        f"exec {_argv(spec, *more)} < {PROMPT}\n"
    )
    return script, json.dumps(settings)


# Gemini CLI connects no MCP server, even a user-level one, in a folder it does not trust,
# and ``--skip-trust`` alone does not change that.
TRUSTED = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}


def invocation(spec: AgentRunSpec, workspace: WorkspaceContext = NO_WORKSPACE) -> Invocation:
    """With no policy the pod is the boundary: every tool runs without asking (headless,
    Gemini CLI would leave out the tools that ask), in a trusted workspace (whose
    ``.gemini/settings.json`` gives the Workspace's MCP servers)."""
    auth = _auth(spec)
    if not auth:
        script = f"exec {_argv(spec, '--approval-mode', 'yolo')} < {PROMPT}\n"
        return Invocation(script=script, env=TRUSTED)
    script, settings = _script(spec, auth, "--approval-mode", "yolo")
    return Invocation(script=script, env=TRUSTED, files={SETTINGS: settings})


def native_policy(policy: SandboxPolicySpec, mcp_servers: tuple[str, ...] = ()) -> str:
    """The policy as Gemini CLI admin policy rules (the highest tier, which no user or
    workspace rule overrides): its shell allowed, since the gate judges each command; the
    file and web tools per fileWrite and network, those to ask about allowed too, since the
    gate asks (headless, Gemini's own ask is a refusal); the tools of the Workspace's MCP
    servers allowed (headless, Gemini leaves out a tool it would ask about)."""
    decisions = [("run_shell_command", Decision.ALLOW)]
    decisions += [(tool, policy.capabilities.file_write) for tool in FILE_TOOLS]
    decisions += [(tool, policy.capabilities.network) for tool in WEB_TOOLS]
    rules = [
        f'[[rule]]\ntoolName = "{tool}"\n'
        f'decision = "{"deny" if decision == Decision.DENY else "allow"}"\npriority = 900\n'
        for tool, decision in decisions
    ]
    rules += [
        f'[[rule]]\nmcpName = {json.dumps(name)}\ntoolName = "*"\ndecision = "allow"\n'
        "priority = 900\n"
        for name in mcp_servers
    ]
    return "\n".join(rules)


def gated_tools(policy: SandboxPolicySpec) -> list[str]:
    """The tools whose calls go through the gate: the shell, and those the policy asks about."""
    tools = ["run_shell_command"]
    if policy.capabilities.file_write == Decision.ASK:
        tools.extend(FILE_TOOLS)
    if policy.capabilities.network == Decision.ASK:
        tools.extend(WEB_TOOLS)
    return tools


def gated(
    spec: AgentRunSpec, policy: SandboxPolicySpec, workspace: WorkspaceContext = NO_WORKSPACE
) -> Invocation:
    """Gemini CLI with a BeforeTool hook that runs the gate, in the user settings it reads,
    and the policy's rules as an admin policy (``--admin-policy``). The workspace is not
    trusted (``GEMINI_CLI_TRUST_WORKSPACE=false``): its ``.gemini/settings.json``, which the
    agent can write (``hooksConfig.enabled: false`` would switch user hooks off), is not read,
    nor are its ``.gemini/skills``: the Workspace's MCP servers and agent skills come from
    the operator, in the user settings and the user's skills directory. Gemini's hook
    timeout is in milliseconds."""
    hook = {"type": "command", "command": GATE_COMMAND, "timeout": hook_seconds(spec) * 1000}
    settings: dict[str, Any] = {
        **_auth(spec),
        "hooks": {"BeforeTool": [{"matcher": "|".join(gated_tools(policy)), "hooks": [hook]}]},
    }
    if workspace.mcp:  # the Workspace's, which the untrusted workspace's settings no longer give
        settings["mcpServers"] = workspace.mcp
    script, text = _script(spec, settings, "--admin-policy", run_file(POLICY_FILE))
    files = {
        "gate": run_scripts.GATE,
        SETTINGS: text,
        POLICY_FILE: native_policy(policy, tuple(workspace.mcp)),
    }
    return Invocation(
        script=_skills(workspace.skills, files) + script,
        env={
            "GEMINI_CLI_TRUST_WORKSPACE": "false",
            "PADDOCK_GATE_SECONDS": str(gate_seconds(spec)),
        },
        files=files,
    )


def _skills(skills: dict[str, str], files: dict[str, str]) -> str:
    """The lines that put the Workspace's skills in the user's skills directory (the run's
    files arrive flat: each SKILL.md is moved into place), adding those files."""
    return "".join(line + "\n" for line in skill_lines(skills, f"{USER_SETTINGS}/skills", files))


def request_of(request: dict[str, Any]) -> Request | None:
    """What a BeforeTool request asks about: ``tool_input.command`` of the shell, the path of
    a file tool, the prompt or query of a web tool."""
    return tool_request(request, TOOL_TARGETS)


def parse_line(line: str) -> list[Draft]:
    event = json_object(line)
    if isinstance(event, Draft):
        return [event]
    kind = event.get("type")
    if kind == "init":
        return [session(event.get("session_id"), event.get("model"))]
    if kind == "message":
        if event.get("role") != "assistant":
            return []
        text = str(event.get("content", ""))
        return [
            Draft(
                ev.MESSAGE,
                text,
                {"role": "assistant", "text": text, "delta": bool(event.get("delta"))},
            )
        ]
    if kind == "tool_use":
        name, arguments = str(event.get("tool_name", "?")), event.get("parameters")
        return [
            Draft(
                ev.TOOL_CALL,
                call_summary(name, arguments),
                {"id": event.get("tool_id"), "name": name, "input": arguments},
            )
        ]
    if kind == "tool_result":
        output = str(event.get("output") or event.get("status") or "")
        return [
            Draft(
                ev.TOOL_RESULT,
                output,
                {
                    "id": event.get("tool_id"),
                    "output": output,
                    "isError": event.get("status") == "error",
                },
            )
        ]
    if kind == "error":
        message = str(event.get("message") or event.get("error") or event)
        return [Draft(ev.ERROR, message, {"message": message, "severity": event.get("severity")})]
    if kind == "result":
        stats = event.get("stats") or {}
        status = str(event.get("status", ""))
        return [
            Draft(
                ev.RESULT,
                status,
                {
                    "isError": status == "error",
                    "inputTokens": stats.get("input_tokens"),
                    "outputTokens": stats.get("output_tokens"),
                    "stats": stats,
                    "error": event.get("error"),
                },
            )
        ]
    return [other(str(kind), event)]


HARNESS = Harness("gemini", invocation, parse_line, Gate(gated, request_of))
