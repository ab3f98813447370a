"""Answering the gate: each shell command a harness's hook sent from the sandbox, judged by the
run's SandboxPolicy with the same engine as setup steps and command runs. Pure.

An answer is ``allow``, or ``deny`` and the message the agent is shown. A request the gate's
harness cannot read, or a command that needs approval (Paddock cannot ask for one yet), is
refused. Each refusal is a ``policy.denied`` event in the run's log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.gate import MAX_SHOWN, Judged, judge_command
from paddock.runs import events as ev
from paddock.runs.events import Draft


@dataclass
class Answered:
    """The answer to each request id, and the events to log."""

    answers: dict[str, str] = field(default_factory=dict)
    drafts: list[Draft] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


def answer(
    requests: dict[str, bytes],
    policy: SandboxPolicySpec,
    scripts: dict[str, str],
    command_of: Callable[[dict[str, Any]], str | None],
) -> Answered:
    answered = Answered()
    for request_id, raw in sorted(requests.items()):
        command = _command(raw, command_of)
        if command is None:
            message = "Paddock's gate could not read this command request; it is refused."
            answered.answers[request_id] = f"deny\n{message}\n"
            answered.drafts.append(Draft(ev.POLICY_DENIED, message, {"reason": "Unreadable"}))
            answered.decisions.append(Decision.DENY)
            continue
        judged = judge_command(policy, command, scripts)
        answered.decisions.append(judged.decision)
        if judged.decision == Decision.ALLOW:
            answered.answers[request_id] = "allow\n"
            continue
        message = _refusal(judged)
        answered.answers[request_id] = f"deny\n{message}\n"
        answered.drafts.append(_denied(judged, message))
    return answered


def _command(raw: bytes, command_of: Callable[[dict[str, Any]], str | None]) -> str | None:
    try:
        request = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return command_of(request) if isinstance(request, dict) else None


def _refusal(judged: Judged) -> str:
    """What the agent is told: which part and rule refused the command."""
    return "Paddock policy: " + judged.message("The command", nothing_ran=False)


def _denied(judged: Judged, message: str) -> Draft:
    part = judged.verdict.deciding
    data: dict[str, Any] = {
        "command": judged.command,
        "decision": str(judged.decision),
        "message": message,
    }
    if part is not None:
        data |= {"part": part.text, "kind": part.kind, "rule": part.rule}
    shown = " ".join(judged.command.split())[:MAX_SHOWN]
    return Draft(ev.POLICY_DENIED, f"{judged.decision}: {shown}", data)
