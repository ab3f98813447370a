"""harness: gemini — ``gemini -p --output-format stream-json``."""

from __future__ import annotations

from paddock.api.agentrun import AgentRunSpec
from paddock.harness.base import (
    PROMPT,
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
        "gemini",
        "--output-format",
        "stream-json",
        "--skip-trust",
        *option("-m", spec.model),
        *option("--resume", spec.session_id),
    )
    return Invocation(script=f'exec {argv} -p "$(cat {PROMPT})"\n')


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


HARNESS = Harness("gemini", invocation, parse_line)
