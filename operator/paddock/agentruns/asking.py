"""A run's requests to a person: a command, a file write or a host the policy says to ask
about, recorded in the run's status as an approval, decided through an
``approval.paddock.dev/<id>`` annotation that names the digest of the text shown, expired
after ``spec.approvalTimeout``, and denied when the run ends. Pure. Each is an
``approval.requested`` and an ``approval.resolved`` event in the run's log; the status keeps
the pending ones and the newest resolved."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from paddock.api.approvals import APPROVAL_ANNOTATION as ANNOTATION_PREFIX
from paddock.api.approvals import Approval, ApprovalState, digest_of, parse_decision, visible
from paddock.api.approvals import ApprovalChoice as Choice
from paddock.api.conditions import Notice
from paddock.api.policy import Decision
from paddock.api.reasons import RunReason as R
from paddock.harness.base import RequestKind
from paddock.policy.gate import MAX_SHOWN, Judged
from paddock.runs import events as ev
from paddock.runs.events import Draft

KEPT_RESOLVED = 20  # resolved approvals the status keeps, newest last

# The longest text a person is asked about: shown whole on every face, or denied at once.
MAX_ASKED_CHARS = 16_384

MAX_ASKED_BYTES = 32_768  # ... and as the status holds it (JSON escapes grow controls)

TARGET_CHARS = 1000  # what a decided request keeps of its text

MAX_PENDING = 20  # requests of a run waiting for a person at once: its status stays small

COMMAND_REQUEST = "command"  # the key of a command run's own request to run its command


def new_token() -> str:
    """The random part of an approval's id: nobody can name (and so decide) a request before
    it exists, in an annotation or otherwise."""
    return secrets.token_hex(4)


def request_of(approval: Approval) -> str:
    """The request an approval is about (the gate's request id, or ``command``): its id
    without the random part."""
    return approval.id.partition(".")[0]


def choices(annotations: Mapping[str, str]) -> dict[str, tuple[Choice, str]]:
    """The decisions the run's annotations record, by approval id: the choice and the digest
    of the text it names (other values: none)."""
    found = {}
    for key, value in annotations.items():
        decided = parse_decision(value) if key.startswith(ANNOTATION_PREFIX) else None
        if decided is not None:
            found[key.removeprefix(ANNOTATION_PREFIX)] = decided
    return found


@dataclass
class Answered:
    """The answer to each request id that is decided, the approvals as they now are, and
    the events to log and post."""

    answers: dict[str, str] = field(default_factory=dict)
    drafts: list[Draft] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)

    @property
    def pending(self) -> list[Approval]:
        return [a for a in self.approvals if a.state == ApprovalState.PENDING]


@dataclass(frozen=True)
class Asking:
    """Where the run's approvals stand: what the status holds, what people decided, the
    clock and how long a request may wait."""

    approvals: list[Approval]
    choices: dict[str, tuple[Choice, str]]
    now: datetime
    timeout: timedelta
    timeout_text: str = ""
    token: Callable[[], str] = new_token  # the random part of a new approval's id


# What the agent is told a request was, by its kind.
NOUNS = {RequestKind.COMMAND: "The command", RequestKind.FILE_WRITE: "Writing the file",
         RequestKind.NETWORK: "The web access"}  # fmt: skip


def allowing(runs: str | None = None) -> str:
    """An answer of allow; ``runs``: the text Paddock's shell is given for the command, which
    the answer lets it run once (the gate server keeps it)."""
    if runs is None:
        return "allow\n"
    return f"allow\nticket {base64.b64encode(runs.encode()).decode()}\n"


def ask_command(judged: Judged, asking: Asking) -> Answered:
    """A ``command`` run's command that the policy says to ask about: one request (its id
    ``command.<random>``), recorded, decided and expired as an agent's are."""
    answered = Answered(approvals=list(asking.approvals))
    expire(answered, asking)
    ask(answered, COMMAND_REQUEST, judged, asking)
    answered.approvals = kept(answered.approvals)
    return answered


def expire(answered: Answered, asking: Asking) -> None:
    """Pending approvals older than the timeout are denied: also those whose request is
    gone (its harness stopped waiting), so that none stays pending for ever."""
    for index, approval in enumerate(answered.approvals):
        if approval.state == ApprovalState.PENDING and asking.now >= (
            approval.requested_at + asking.timeout
        ):
            message = f"nobody approved it within {asking.timeout_text or asking.timeout}"
            _resolve(answered, index, ApprovalState.EXPIRED, message, asking.now)


def end_all(approvals: list[Approval], now: datetime) -> tuple[list[Approval], list[Draft]]:
    """The run ended: its pending approvals are denied."""
    answered = Answered(approvals=list(approvals))
    for index, approval in enumerate(answered.approvals):
        if approval.state == ApprovalState.PENDING:
            _resolve(answered, index, ApprovalState.DENIED, "the run ended", now)
    return kept(answered.approvals), answered.drafts


def ask(
    answered: Answered, request_id: str, judged: Judged, asking: Asking, runs: str | None = None
) -> None:
    """A request to ask about: recorded, left waiting, or answered as it was decided (an
    approval allows ``runs`` as a policy's allow does)."""
    index = next((i for i, a in enumerate(answered.approvals) if request_of(a) == request_id), None)
    if index is None:
        index = _request(answered, request_id, judged, asking)
    approval = answered.approvals[index]
    if approval.state == ApprovalState.PENDING and approval.digest not in (
        None,
        digest_of(judged.command),
    ):
        # The same request with other text (a command run's command, changed): never the
        # text a person saw; denied.
        message = "denied: the request's text changed after it was asked about"
        _resolve(answered, index, ApprovalState.DENIED, message, asking.now)
        approval = answered.approvals[index]
    decided = asking.choices.get(approval.id)
    if approval.state == ApprovalState.PENDING and decided is not None:
        _decide(answered, index, decided, asking.now)
        approval = answered.approvals[index]
    if approval.state == ApprovalState.PENDING:
        return  # the gate waits
    # Decided, now or before (an answer the sandbox did not take is given again).
    if approval.state == ApprovalState.APPROVED:
        answered.decisions.append(Decision.ALLOW)
        answered.answers[request_id] = allowing(runs)
        return
    answered.decisions.append(Decision.DENY)
    message = "Paddock policy: " + not_approved(approval, judged.command)
    answered.answers[request_id] = f"deny\n{message}\n"


def _decide(answered: Answered, index: int, decided: tuple[Choice, str], now: datetime) -> None:
    """A person's decision: an approval allows only the text it names (its digest); one
    naming other text, or none, denies."""
    choice, digest = decided
    approval = answered.approvals[index]
    if choice != Choice.DENY and (approval.digest is None or digest != approval.digest):
        message = (
            f"denied: the approval named {digest or 'no text'}, not this request's text "
            f"({approval.digest or 'asked before approvals named text'})"
        )
        _resolve(answered, index, ApprovalState.DENIED, message, now)
        return
    state = ApprovalState.DENIED if choice == Choice.DENY else ApprovalState.APPROVED
    said = {Choice.APPROVE: "approved", Choice.ALWAYS: "approved for the rest of the run"}
    _resolve(
        answered, index, state, said.get(choice, "denied"), now, always=choice == Choice.ALWAYS
    )


def not_approved(approval: Approval, command: str) -> str:
    """What a request that was denied or expired is refused with."""
    return (
        f"{_noun(approval)} `{shown(command)}` needed approval (request {approval.id}) and "
        f"was not approved: {approval.message}."
    )


def _request(answered: Answered, request_id: str, judged: Judged, asking: Asking) -> int:
    """Record a new approval request (approved at once when an earlier approve-always covers
    every rule that asks); its index."""
    rules = sorted({p.rule for p in judged.verdict.parts if p.decision == Decision.ASK})
    text = judged.command
    approval = Approval(
        id=f"{request_id}.{asking.token()}",
        kind=str(judged.where),
        target=ev.one_line(text, TARGET_CHARS) if _too_long(text) else text,
        digest=digest_of(text),
        rules=rules,
        state=ApprovalState.PENDING,
        requested_at=asking.now,
    )
    answered.approvals.append(approval)
    index = len(answered.approvals) - 1
    answered.drafts.append(_requested(approval))
    waiting = len(answered.pending) - 1  # (others than this one)
    if _too_long(text):
        message = (
            f"denied: its {len(text)} characters are more than a person is shown whole "
            f"({MAX_ASKED_CHARS}, {MAX_ASKED_BYTES} bytes as the status holds them)"
        )
        _resolve(answered, index, ApprovalState.DENIED, message, asking.now)
    elif waiting >= MAX_PENDING and not (
        rules and set(rules) <= _always_approved(asking.approvals)
    ):
        message = f"denied: {waiting} requests already wait for a person, the most a run may hold"
        _resolve(answered, index, ApprovalState.DENIED, message, asking.now)
    elif rules and set(rules) <= _always_approved(asking.approvals):
        message = "approved for the rest of the run by an earlier approve-always"
        _resolve(answered, index, ApprovalState.APPROVED, message, asking.now)
    else:
        answered.notices.append(Notice(R.APPROVAL_REQUESTED, _request_message(approval)))
    return index


def _resolve(
    answered: Answered,
    index: int,
    state: ApprovalState,
    message: str,
    now: datetime,
    *,
    always: bool = False,
) -> None:
    decided = answered.approvals[index]
    approval = decided.model_copy(
        update={"state": state, "resolved_at": now, "message": message, "always": always,
                "target": ev.one_line(decided.target, TARGET_CHARS)}
    )  # fmt: skip
    answered.approvals[index] = approval
    data = {"id": approval.id, "state": str(state), "target": approval.target, "message": message}
    summary = f"{str(state).lower()}: {shown(approval.target)} ({message})"
    answered.drafts.append(Draft(ev.APPROVAL_RESOLVED, summary, data))
    reason = {
        ApprovalState.APPROVED: R.APPROVED,
        ApprovalState.DENIED: R.APPROVAL_DENIED,
        ApprovalState.EXPIRED: R.APPROVAL_EXPIRED,
    }[state]
    answered.notices.append(
        Notice(reason, f"Request {approval.id}, `{shown(approval.target)}`: {message}.")
    )


def _too_long(text: str) -> bool:
    return len(text) > MAX_ASKED_CHARS or len(json.dumps(text)) > MAX_ASKED_BYTES


def _always_approved(approvals: list[Approval]) -> set[str]:
    return {
        rule
        for a in approvals
        if a.always and a.state == ApprovalState.APPROVED
        for rule in a.rules
    }


def kept(approvals: list[Approval]) -> list[Approval]:
    """Every pending approval, every approve-always one (it still decides), and the newest
    resolved others."""
    lasting = [a for a in approvals if a.state == ApprovalState.PENDING or a.always]
    resolved = [a for a in approvals if a not in lasting][-KEPT_RESOLVED:]
    return [a for a in approvals if a in lasting or a in resolved]


def _requested(approval: Approval) -> Draft:
    data = {"id": approval.id, "kind": approval.kind, "target": approval.target,
            "digest": approval.digest, "rules": approval.rules}  # fmt: skip
    return Draft(ev.APPROVAL_REQUESTED, f"needs approval: {shown(approval.target)}", data)


def _request_message(approval: Approval) -> str:
    return (
        f"Request {approval.id}: {_noun(approval)} `{shown(approval.target)}` needs approval "
        f"({', '.join(approval.rules)}). Approve or deny it with paddock approve or "
        f"paddock deny, or annotate the run {ANNOTATION_PREFIX}{approval.id}="
        f"approve:{approval.digest} (or deny)."
    )


def _noun(approval: Approval) -> str:
    kinds = {str(kind): noun.lower() for kind, noun in NOUNS.items()}
    return kinds.get(approval.kind, "the request")


def shown(command: str) -> str:
    shown = " ".join(visible(command).split())
    return shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 3] + "..."
