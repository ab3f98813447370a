"""Paddock's normalised run events, and what a run's log adds up to.

An event is ``{"seq", "time", "type", "summary", "data"}``. ``seq`` counts from 0 without gaps;
it is given when the event is appended to the log, never by a harness parser.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from paddock.runs.scrubbing import Scrubber

# Event types. Harness parsers produce the middle group; the operator the rest.
RUN_STARTED = "run.started"
SANDBOX_READY = "sandbox.ready"
SESSION_ID = "session-id"
MESSAGE = "message"
TOOL_CALL = "tool.call"
TOOL_RESULT = "tool.result"
OUTPUT = "output"
NOTICE = "notice"
ERROR = "error"
RESULT = "result"
SANDBOX_FILE = "sandbox.file"
FILE_CHANGED = "file.changed"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_ABORTED = "run.aborted"
POLICY_DENIED = "policy.denied"
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_RESOLVED = "approval.resolved"
RUN_DELIVERED = "run.delivered"  # the run's work pushed (and its pull request opened)
RUN_UNDELIVERED = "run.undelivered"  # its delivery refused or failed, and why
USAGE = "usage"  # what the run used at the egress gateway's model route, so far
TERMINAL_TYPES = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_ABORTED})
METERED_FIELDS = ("inputTokens", "outputTokens", "costUsd", "modelRequests")
UNKNOWN_FIELDS = ("unpricedResponses", "uncountedResponses")  # in the status where not zero

SUMMARY_LIMIT = 200
TEXT_LIMIT = 16384  # longest string kept in an event's data; the rest is cut with a marker
LAST_EVENTS = 10


@dataclass(frozen=True)
class Draft:
    """An event before it is appended: no seq or time yet."""

    type: str
    summary: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def one_line(text: str, limit: int = SUMMARY_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def _bounded(value: Any) -> Any:
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, dict):
        return {key: _bounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_bounded(item) for item in value]
    return value


def now() -> datetime:
    return datetime.now(UTC)


def stamp(
    draft: Draft, seq: int, when: datetime, scrubber: Scrubber | None = None
) -> dict[str, Any]:
    """The stored form of a draft: numbered, timed, bounded and scrubbed."""
    event = {
        "seq": seq,
        "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "type": draft.type,
        "summary": one_line(draft.summary),
        "data": _bounded(draft.data),
    }
    if scrubber is None:
        return event
    scrubbed: dict[str, Any] = scrubber(event)
    return scrubbed


def encode(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


@dataclass
class RunSummary:
    """What a run's log adds up to: the fields of its status that come from events. Folding the
    whole log again gives the same summary, which is how an operator restart rebuilds it."""

    next_seq: int = 0
    session_id: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    metered: dict[str, Any] | None = None  # the last usage event's data (the gateway's count)
    budget: dict[str, Any] | None = None  # the ceilings the run started with
    result: dict[str, Any] | None = None
    changed_files: list[str] = field(default_factory=list)
    types_seen: set[str] = field(default_factory=set)
    last: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=LAST_EVENTS))
    terminal: dict[str, Any] | None = None
    last_error: str | None = None  # the harness's own last word on what went wrong

    def add(self, event: dict[str, Any]) -> None:
        if event["seq"] != self.next_seq:
            raise ValueError(f"event seq {event['seq']} where {self.next_seq} was next")
        self.next_seq += 1
        kind, data = event["type"], event.get("data") or {}
        self.types_seen.add(kind)
        self.last.append(event)
        if kind == SESSION_ID:
            self.session_id = data.get("sessionId")
        elif kind == RESULT:
            self.result = data
            usage = {k: data[k] for k in ("inputTokens", "outputTokens", "costUsd") if k in data}
            if self.metered is None:  # the gateway's count, where there is one, is the record
                self.usage |= {k: v for k, v in usage.items() if v is not None}
        elif kind == USAGE:
            self.metered = data
            self.usage = {k: data[k] for k in METERED_FIELDS if data.get(k) is not None}
            self.usage |= {k: data[k] for k in UNKNOWN_FIELDS if data.get(k)}
        elif kind == RUN_STARTED:
            self.budget = data.get("budget")
        elif kind == FILE_CHANGED:
            self.changed_files = [f["path"] for f in data.get("files", [])]
        elif kind == ERROR and "reason" not in data:  # not one of Paddock's own parse errors
            self.last_error = event.get("summary") or None
        elif kind in TERMINAL_TYPES:
            self.terminal = event

    def add_all(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            self.add(event)
