"""harness: opencode — ``opencode run --format json``."""

from __future__ import annotations

from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.harness.base import (
    PROMPT,
    WORKSPACE,
    Harness,
    Invocation,
    call_summary,
    command_line,
    json_object,
    option,
    other,
    session,
)
from paddock.runs import events as ev
from paddock.runs.events import Draft


def invocation(spec: AgentRunSpec) -> Invocation:
    argv = command_line(
        "opencode",
        "run",
        "--format",
        "json",
        "--dir",
        WORKSPACE,
        *option("-m", spec.model),
        *option("--session", spec.session_id),
    )
    # opencode run takes the message as arguments; a prompt is not secret, so argv is fine.
    return Invocation(script=f'exec {argv} "$(cat {PROMPT})"\n')


def _tool(part: dict[str, Any]) -> list[Draft]:
    state = part.get("state") or {}
    name, call_id = str(part.get("tool", "?")), part.get("callID") or part.get("id")
    drafts = [
        Draft(
            ev.TOOL_CALL,
            call_summary(name, state.get("input")),
            {"id": call_id, "name": name, "input": state.get("input")},
        )
    ]
    status = state.get("status")
    if status in ("completed", "error"):
        output = str(state.get("output") or state.get("error") or "")
        drafts.append(
            Draft(
                ev.TOOL_RESULT,
                output or status,
                {"id": call_id, "name": name, "output": output, "isError": status == "error"},
            )
        )
    return drafts


def parse_line(line: str) -> list[Draft]:
    event = json_object(line)
    if isinstance(event, Draft):
        return [event]
    kind, part = event.get("type"), event.get("part") or {}
    drafts = []
    session_id = event.get("sessionID") or part.get("sessionID")
    if kind == "step_start" and session_id:
        drafts.append(session(session_id))
    if kind == "step_start":
        return drafts
    if kind == "tool_use":
        return _tool(part)
    if kind == "text":
        text = str(part.get("text", ""))
        return [Draft(ev.MESSAGE, text, {"role": "assistant", "text": text})]
    if kind == "step_finish":
        tokens = part.get("tokens") or {}
        return [
            Draft(
                ev.RESULT,
                str(part.get("reason") or "step finished"),
                {
                    "isError": False,
                    "costUsd": part.get("cost"),
                    "inputTokens": tokens.get("input"),
                    "outputTokens": tokens.get("output"),
                },
            )
        ]
    if kind == "error":
        error = event.get("error") or part.get("error") or event
        message = (
            str(error.get("message") or error.get("name") or error)
            if isinstance(error, dict)
            else str(error)
        )
        data = error.get("data") if isinstance(error, dict) else None
        if isinstance(data, dict) and data.get("message"):
            message = str(data["message"])
        return [Draft(ev.ERROR, message, {"message": message, "error": error})]
    if kind == "done":
        return [
            Draft(
                ev.NOTICE,
                f"done: {event.get('reason')}",
                {"reason": event.get("reason"), "rejected": event.get("rejected")},
            )
        ]
    return [other(str(kind), event)]


HARNESS = Harness("opencode", invocation, parse_line)
