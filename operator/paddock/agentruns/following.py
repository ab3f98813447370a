"""Deciding each poll of a running run. Pure: a poll of its journals in (and how far the
operator has followed it); the events it brings, and whether and how the run ended, out. Also
which signal an aborted run is sent next."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from paddock.agentruns.decide import Ending, genuine, sandbox_lost
from paddock.api.agentrun import AgentRunSpec, Harness, RunPhase
from paddock.api.reasons import RunReason as R
from paddock.render import run_scripts
from paddock.runs import events as ev
from paddock.runs import journal
from paddock.runs.events import Draft, RunSummary

KILL_GRACE_SECONDS = 10.0
STDERR_LINES = 20
WRAPPER_GONE_POLLS = 2  # polls without the wrapper or its record before the run is lost


def signal_to_send(
    signalled: dict[str, datetime], now: datetime, grace: float = KILL_GRACE_SECONDS
) -> str | None:
    """TERM first; KILL once the grace has passed since TERM; then nothing more."""
    first = signalled.get("TERM")
    if first is None:
        return "TERM"
    if (now - first).total_seconds() >= grace and "KILL" not in signalled:
        return "KILL"
    return None


IDLE_POLL_SECONDS = 1.0  # between exec polls (no stream), or while a run is being stopped
QUIET_SECONDS = 10.0  # between steps of a streamed run with no news (its stream wakes it)


def next_step(followed: Followed, soon: bool, to_deadline: float | None) -> float:
    """Seconds until a running run's next step if nothing wakes it first: at once while more
    waits; a second while it is polled by exec, being stopped or waiting for a person (an
    approval times out); else when its deadline comes, QUIET_SECONDS at most."""
    if followed.poll_again_now:
        return 0
    if soon:
        return IDLE_POLL_SECONDS
    return min(QUIET_SECONDS, to_deadline or QUIET_SECONDS)


@dataclass(frozen=True)
class Progress:
    """How far the operator has followed a running run."""

    pod: str
    cursor: dict[str, int]
    summary: RunSummary
    expected_digest: str | None  # of the completion nonce, from the status
    wrapper_gone_polls: int = 0
    keep: int = 0  # bytes a cut line leaves for the next poll (the longest secret form)


@dataclass(frozen=True)
class Followed:
    """What one poll of a running run adds up to."""

    drafts: list[Draft]
    cursor: dict[str, int]
    poll_again_now: bool = False
    ending: Ending | None = None
    wrapper_gone_polls: int = 0


def follow(
    spec: AgentRunSpec,
    poll: run_scripts.Poll,
    parse: Callable[[str], list[Draft]],
    progress: Progress,
    abort_ending: Ending | None,
) -> Followed:
    """The events a poll brings, and whether the run has ended: completed with its own nonce
    (once the journal is read to its end), or its wrapper gone without a record. A record
    without the run's nonce is an agent's forgery: noted once, and otherwise ignored."""
    if poll.missing:
        message = (
            f"the run's directory is gone from pod {progress.pod}: the pod was replaced while "
            "the run was running"
        )
        return Followed([], progress.cursor, ending=sandbox_lost(message))
    completion = poll.completion
    final = completion is not None and genuine(completion.nonce, progress.expected_digest)
    journals = {"stdout": poll.stdout, "files": poll.files}
    summary = progress.summary
    consumed = journal.consume(
        parse, journals, progress.cursor, summary.session_id, final=final, keep=progress.keep
    )
    drafts, cursor = consumed.drafts, consumed.cursor
    if consumed.more:
        return Followed(drafts, cursor, poll_again_now=True)
    if completion is not None and not final:
        return Followed(drafts + ([] if _forgery_noted(summary) else [forged_event()]), cursor)
    if completion is not None:
        # The last poll's own events (an agent's final error, above all) count for the end.
        after = _folded(summary, drafts)
        ending = completed(spec, poll, completion.exit_code, after, abort_ending)
        return Followed(drafts, cursor, ending=ending)
    gone = 0 if poll.wrapper_alive else progress.wrapper_gone_polls + 1
    if gone < WRAPPER_GONE_POLLS:  # the record is written before the wrapper exits
        return Followed(drafts, cursor, wrapper_gone_polls=gone)
    message = (
        "the harness's wrapper ended without a completion record (killed, or the sandbox "
        "container restarted)"
    )
    ending = Ending(RunPhase.FAILED, R.WRAPPER_LOST, message)
    return Followed(drafts, cursor, ending=ending, wrapper_gone_polls=gone)


def _folded(summary: RunSummary, drafts: list[Draft]) -> RunSummary:
    """The summary as it will be once ``drafts`` are appended (their times do not matter)."""
    folded = copy.deepcopy(summary)
    first = folded.next_seq
    folded.add_all([ev.stamp(d, first + i, _EPOCH) for i, d in enumerate(drafts)])
    return folded


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def forged_event() -> Draft:
    return Draft(
        ev.ERROR,
        "a completion record without the run's nonce was ignored",
        {"reason": "ForgedCompletion"},
    )


def _forgery_noted(summary: RunSummary) -> bool:
    return any(
        e["type"] == ev.ERROR and e["data"].get("reason") == "ForgedCompletion"
        for e in summary.last
    )


def completed(
    spec: AgentRunSpec,
    poll: run_scripts.Poll,
    code: int,
    summary: RunSummary,
    abort_ending: Ending | None,
) -> Ending:
    """How a run whose harness exited ends: the changes it made, and its phase and message."""
    changes = run_scripts.parse_changes(poll.changes)
    drafts: tuple[Draft, ...] = ()
    if changes or poll.diff:
        files = [{"path": p, "status": s} for s, p in changes]
        drafts = (
            Draft(
                ev.FILE_CHANGED,
                f"{len(changes)} file(s) changed",
                {"files": files, "diff": poll.diff},
            ),
        )
    stderr = "\n".join(poll.stderr_tail.splitlines()[-STDERR_LINES:])
    result = summary.result or {}
    if abort_ending is not None:
        phase, reason, message = abort_ending.phase, abort_ending.reason, abort_ending.message
    elif code == 0 and not result.get("isError"):
        phase, reason, message = RunPhase.SUCCEEDED, R.SUCCEEDED, f"{spec.harness} finished"
    else:
        phase, reason = RunPhase.FAILED, R.FAILED
        why = failure_cause(spec, stderr, summary)
        message = f"{spec.harness} exited with code {code}" + (f": {why}" if why else "")
    return Ending(phase, reason, message, code, stderr, drafts)


def failure_cause(spec: AgentRunSpec, stderr: str, summary: RunSummary) -> str:
    """The likeliest reason a harness failed: an agent's own error event or error result
    before its stderr (where CLIs also print warnings); a command's stderr."""
    last_stderr = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if spec.harness == Harness.COMMAND:
        return last_stderr
    if summary.last_error:
        return summary.last_error
    result = summary.result or {}
    if result.get("isError") and result.get("text"):
        return str(result["text"])
    return last_stderr
