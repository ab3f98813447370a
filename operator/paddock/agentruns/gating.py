"""Answering the gate: each shell command a harness's hook sent from the sandbox, judged by the
run's SandboxPolicy with the same engine as setup steps and command runs. Pure.

An answer is ``allow`` (with, for a command that Paddock's shell will run, a ``ticket`` line:
the text the shell may then run, once), or ``deny`` and the message the agent is shown. A
request the gate's harness cannot read is refused. A command the policy says to ask about
becomes an approval (``asking.py``): it is left unanswered (the gate waits) until a person
approves or denies it, or ``spec.approvalTimeout`` passes. Each refusal is a
``policy.denied`` event in the run's log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from paddock.agentruns.asking import NOUNS, Answered, Asking, allowing, ask, expire, kept, shown
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.harness.base import Request, RequestKind
from paddock.policy.engine import Part, PartKind, Verdict
from paddock.policy.gate import Judged, judge_capability, judge_command, judge_writes
from paddock.policy.hosts import ask_rule, judge_host
from paddock.runs import events as ev
from paddock.runs.events import Draft

HOST_REQUEST = "host-"  # how the request of a host the egress gateway asked about begins

MAX_HOSTS_ASKED = 20  # approvals of hosts a run records at most: an agent cannot flood it


def answer(
    requests: dict[str, bytes],
    policy: SandboxPolicySpec,
    scripts: dict[str, str],
    request_of: Callable[[dict[str, Any]], Request | None],
    asking: Asking,
    hosts: Iterable[str] = (),
) -> Answered:
    """The answers to the gate's requests, and the approvals as they now are; ``hosts``: each
    HOST:PORT the egress gateway asked about for the run, which becomes an approval of kind
    network (the gateway reads the approved ones from the run's status)."""
    answered = Answered(approvals=list(asking.approvals))
    expire(answered, asking)
    known = {a.target for a in answered.approvals if a.id.startswith(HOST_REQUEST)}
    waiting = {a.target for a in answered.pending if a.id.startswith(HOST_REQUEST)}
    room = max(MAX_HOSTS_ASKED - len(known), 0)
    for target in sorted(waiting) + sorted(set(hosts) - known)[:room]:
        _ask_host(answered, target, policy, asking)
    for request_id, raw in sorted(requests.items()):
        request = _read(raw, request_of)
        if request is None:
            message = "Paddock's gate could not read this request; it is refused."
            answered.answers[request_id] = f"deny\n{message}\n"
            answered.drafts.append(Draft(ev.POLICY_DENIED, message, {"reason": "Unreadable"}))
            answered.decisions.append(Decision.DENY)
            continue
        judged = judge(policy, request, scripts)
        if judged.decision == Decision.ASK:
            ask(answered, request_id, judged, asking, request.ticket)
            continue
        answered.decisions.append(judged.decision)
        if judged.decision == Decision.ALLOW:
            answered.answers[request_id] = allowing(request.ticket)
            continue
        message = "Paddock policy: " + judged.message(NOUNS[request.kind], nothing_ran=False)
        answered.answers[request_id] = f"deny\n{message}\n"
        answered.drafts.append(_denied(judged, message))
    answered.approvals = kept(answered.approvals)
    return answered


def _ask_host(answered: Answered, target: str, policy: SandboxPolicySpec, asking: Asking) -> None:
    """A host the gateway asked about, while the policy still says to ask: an approval (one
    per HOST:PORT), recorded and decided as a command's; the gateway waits on none."""
    host, _, port = target.rpartition(":")
    if policy.network.hosts is None or not port.isdigit():
        return
    verdict = judge_host(policy.network.hosts, host, int(port))
    if verdict.decision != Decision.ASK:
        return  # the policy changed since: the gateway decides the next connection anew
    part = Part(PartKind.NETWORK, target, Decision.ASK, ask_rule(verdict))
    judged = Judged(str(RequestKind.NETWORK), target, Verdict(Decision.ASK, (part,)))
    request_id = HOST_REQUEST + hashlib.sha256(target.encode()).hexdigest()[:12]
    ask(answered, request_id, judged, asking)
    answered.answers.pop(request_id, None)  # (no gate waits for it)


def judge(policy: SandboxPolicySpec, request: Request, scripts: dict[str, str]) -> Judged:
    if request.kind == RequestKind.COMMAND:
        return judge_command(policy, request.target, scripts)
    if request.writes:
        return judge_writes(policy, request.target, request.writes)
    return judge_capability(policy, PartKind(str(request.kind)), request.target)


def _read(raw: bytes, request_of: Callable[[dict[str, Any]], Request | None]) -> Request | None:
    try:
        request = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return request_of(request) if isinstance(request, dict) else None


def _denied(judged: Judged, message: str) -> Draft:
    part = judged.verdict.deciding
    data: dict[str, Any] = {
        "command": judged.command,
        "decision": str(judged.decision),
        "message": message,
    }
    if part is not None:
        data |= {"part": part.text, "kind": part.kind, "rule": part.rule}
    return Draft(ev.POLICY_DENIED, f"{judged.decision}: {shown(judged.command)}", data)
