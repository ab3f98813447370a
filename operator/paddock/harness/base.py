"""What every harness module provides, and the helpers their parsers share."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.runs.events import ERROR, SESSION_ID, Draft, one_line

PROMPT = '"$PADDOCK_PROMPT_FILE"'  # the prompt, as a file the launch wrote; never an argv
WORKSPACE = '"$PADDOCK_WORKSPACE"'


@dataclass(frozen=True)
class Invocation:
    """How a harness is started: a bash script run in the workspace, with extra env."""

    script: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Harness:
    """One agent CLI: its headless invocation and its stream parser."""

    name: str
    invocation: Callable[[AgentRunSpec], Invocation]
    parse_line: Callable[[str], list[Draft]]


def command_line(*parts: str | None) -> str:
    """Quote each part except the shell words (``$PADDOCK_...`` references) made above."""
    return " ".join(
        part if part in (PROMPT, WORKSPACE) else shlex.quote(part) for part in parts if part
    )


def option(flag: str, value: str | None) -> tuple[str | None, str | None]:
    return (flag, value) if value else (None, None)


def json_object(line: str) -> dict[str, Any] | Draft:
    """The line as a JSON object, or an error event saying why it is not one."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return Draft(
            ERROR,
            f"unreadable harness output: {exc.msg}",
            {"reason": "MalformedLine", "line": line, "error": str(exc)},
        )
    if not isinstance(value, dict):
        return Draft(
            ERROR,
            "harness output line is not a JSON object",
            {"reason": "MalformedLine", "line": line},
        )
    return value


def text_of(content: Any) -> str:
    """Text from a string or a list of content blocks (``{"type": "text", "text": ...}``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
        )
    return "" if content is None else json.dumps(content)


def call_summary(name: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        for key in ("command", "file_path", "path", "pattern", "url", "query"):
            if isinstance(arguments.get(key), str):
                return one_line(f"{name}: {arguments[key]}")
    return one_line(f"{name} {json.dumps(arguments)}" if arguments else name)


def session(session_id: Any, model: Any = None) -> Draft:
    """The harness's session id (Paddock keeps only changes of it)."""
    data = {"sessionId": session_id} | ({"model": model} if model else {})
    return Draft(SESSION_ID, f"session {session_id}", data)


def other(kind: str, event: dict[str, Any]) -> Draft:
    """A harness event Paddock has no kind for: kept, as a notice, so nothing is lost."""
    return Draft("notice", kind, {"harnessEvent": event})
