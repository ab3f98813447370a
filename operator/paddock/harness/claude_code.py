"""harness: claude-code — ``claude -p --output-format stream-json``."""

from __future__ import annotations

import json
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.harness.base import (
    GATE_COMMAND,
    PROMPT,
    Gate,
    Harness,
    Invocation,
    call_summary,
    command_line,
    gate_seconds,
    hook_seconds,
    json_object,
    option,
    other,
    run_file,
    session,
    text_of,
)
from paddock.render import run_scripts
from paddock.runs import events as ev
from paddock.runs.events import Draft


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


def invocation(spec: AgentRunSpec) -> Invocation:
    return Invocation(script=f"exec {_argv(spec)} < {PROMPT}\n")


SETTINGS = "claude-settings.json"
FILE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
WEB_TOOLS = ("WebFetch", "WebSearch")


def permissions(policy: SandboxPolicySpec) -> dict[str, list[str]]:
    """The policy as Claude Code's own permission rules: Bash is allowed, since the gate
    judges every command; the file-writing and web tools follow fileWrite and network
    (``ask`` is denied: a headless CLI cannot ask)."""
    allow: list[str] = ["Bash"]
    deny: list[str] = []
    for tools, decision in ((FILE_TOOLS, policy.capabilities.file_write),
                            (WEB_TOOLS, policy.capabilities.network)):  # fmt: skip
        (allow if decision == Decision.ALLOW else deny).extend(tools)
    return {"allow": allow, "deny": deny}


def gated(spec: AgentRunSpec, policy: SandboxPolicySpec) -> Invocation:
    """Claude Code with a PreToolUse hook on Bash that runs the gate. The settings are the
    run's own (``--settings``), and only user-level sources are read besides them
    (``--setting-sources user``): a ``.claude/settings.json`` the agent writes into the
    workspace, with ``disableAllHooks``, is never read."""
    hook = {"type": "command", "command": GATE_COMMAND, "timeout": hook_seconds(spec)}
    settings = {
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]},
        "permissions": permissions(policy),
    }
    argv = _argv(spec, "--setting-sources", "user", "--settings", run_file(SETTINGS))
    return Invocation(
        script=f"exec {argv} < {PROMPT}\n",
        env={"PADDOCK_GATE_SECONDS": str(gate_seconds(spec))},
        files={"gate": run_scripts.GATE, SETTINGS: json.dumps(settings)},
    )


def command_of(request: dict[str, Any]) -> str | None:
    """The command of a PreToolUse request for Bash (``tool_input.command``)."""
    tool_input = request.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    return command if request.get("tool_name") == "Bash" and isinstance(command, str) else None


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


HARNESS = Harness("claude-code", invocation, parse_line, Gate(gated, command_of))
