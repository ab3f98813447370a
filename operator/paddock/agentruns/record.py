"""A run's durable record, as one step writes it: the events appended to its log (with the
journal cursor they were read up to) and the status patched with only what changed. It knows
nothing of what a run does (its sandbox, its delivery): ``ending.py`` and ``execution.py``
build on it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from paddock import metrics
from paddock.agentruns import decide
from paddock.api import health
from paddock.api.agentrun import TERMINAL_PHASES, AgentRunStatus, RunPhase
from paddock.api.common import ConditionStatus
from paddock.api.conditions import Notice, get_condition, set_condition
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.errors import ConflictError, KubeError
from paddock.runs import events as ev
from paddock.runs.events import Draft, RunSummary
from paddock.runs.log import ConfigMapLog, RunLog
from paddock.runs.scrubbing import Scrubber
from paddock.times import parse_time, utcnow
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]


class LogNameTakenError(Exception):
    """A ConfigMap the run's log needs is held by another object."""


@dataclass
class RunRecord:
    """The run as last read, its log and status as this operator keeps them, and the Events
    to post."""

    run: Obj
    log: RunLog
    summary: RunSummary
    cursor: dict[str, int]
    status: AgentRunStatus
    scrubber: Scrubber = field(default_factory=Scrubber)
    notices: list[Notice] = field(default_factory=list)
    written: Obj = field(default_factory=dict)  # the status as last written
    held: list[Obj] = field(default_factory=list)  # events stamped, not yet in the log
    stall_after: timedelta = health.STALL_AFTER  # waiting for what may never come, then stuck

    @property
    def namespace(self) -> str:
        return str(self.run["metadata"]["namespace"])

    @property
    def run_id(self) -> str:
        return str(self.run["metadata"]["uid"])

    def _append(
        self, drafts: list[Draft], cursor: dict[str, int] | None = None, *, later: bool = False
    ) -> None:
        """Stamp the events and write them to the log, with the journal cursor they were read
        up to, after any held back; ``later``: held back for the next write (a run about to
        start writes its ``sandbox.ready`` with its ``run.started``, in one write)."""
        when = ev.now()
        events = [
            ev.stamp(draft, self.summary.next_seq + i, when, self.scrubber)
            for i, draft in enumerate(drafts)
        ]
        if not later:
            self._write([*self.held, *events], self.cursor if cursor is None else cursor)
            self.held = []
        else:
            self.held += events
        self.summary.add_all(events)

    def _write(self, events: list[Obj], cursor: dict[str, int]) -> None:
        try:
            self.log.append(events, cursor)
        except ConflictError:
            if not isinstance(self.log, ConfigMapLog):
                raise
            name = self.log.next_chunk_name()
            held = kube.get("ConfigMap", self.namespace, name)
            if held is not None and not controlled_by(held, self.run_id):
                raise LogNameTakenError(
                    f"ConfigMap {name} exists and does not belong to this run, so its event "
                    "log cannot be written; Paddock leaves it alone. Delete it, or run under "
                    "another name."
                ) from None
            raise  # written by another operator meanwhile: read the log again
        metrics.RUN_EVENTS.labels(str(self.run["spec"]["harness"])).inc(len(events))
        self.cursor = cursor

    def _write_status(
        self,
        phase: RunPhase,
        message: str | None,
        sandbox: str | None = None,
        reason: R | None = None,
    ) -> None:
        """Set the phase (an Event when it changes, with ``reason``, else the phase, as its
        reason), the message and the sandbox; written by the next ``_flush``."""
        if self.status.phase != phase:
            self.notices.append(Notice(reason or R(str(phase)), message or ""))
        self.status.phase, self.status.message = phase, message
        if sandbox is not None:
            self.status.sandbox_name = sandbox

    def _condition(self, type_: C, value: bool, reason: R, message: str) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            type_,
            value,
            reason,
            message,
            generation=self.run["metadata"].get("generation"),
            now=utcnow(),
        )

    def _flush(self, events: bool = True) -> None:
        """Write the events held back, then what changed in the status since it was last
        written. ``events`` False: the status alone, which then says where the log is but
        nothing yet of the events (their count, the last ones)."""
        if events and self.held:
            self._write(self.held, self.cursor)
            self.held = []
        meta, now = self.run["metadata"], utcnow()
        self.status.observed_generation = meta.get("generation")
        self.status.log = self.log.where()  # (followers wait for it; a restart reads it)
        if events:
            decide.summarise(self.status, self.summary)
        created = parse_time(meta.get("creationTimestamp"))
        found = health.of_run(
            self.status.phase, self.status.conditions, created, now, self.stall_after
        )
        self.status.conditions = health.with_health(
            self.status.conditions, found, meta.get("generation"), now
        )
        new = self.status.to_api()
        patch = {key: value for key, value in new.items() if self.written.get(key) != value}
        if patch:
            stored = kube.patch_status("AgentRun", meta["namespace"], meta["name"], patch)
            self.written |= patch
            if stored is not None:
                self._stored(stored)

    def _stored(self, run: Obj) -> None:
        """The run as the API server stored it after a write of its status (for a subclass
        that keeps others informed)."""

    def _failed(self, reason: R, why: str) -> None:
        """Say that the operator cannot act for the run right now, where it still can."""
        message = f"{why}; retrying."
        self.notices.append(Notice(reason, message))
        self._condition(C.PROGRESSING, False, reason, message)
        with contextlib.suppress(KubeError):
            self._flush()

    def _resolved(self, type_: C, reason: R, message: str) -> None:
        """A condition the run waited on turns True once it starts (only if it was set)."""
        condition = get_condition(self.status.conditions, type_)
        if condition is not None and condition.status == ConditionStatus.FALSE:
            self._condition(type_, True, reason, message)

    def _progressing(self) -> None:
        """After a refusal, the first step that succeeds says so (and only that one writes)."""
        condition = get_condition(self.status.conditions, C.PROGRESSING)
        if condition is not None and condition.status == ConditionStatus.FALSE:
            self._condition(C.PROGRESSING, True, R.RUNNING, "The operator acts for the run.")
            if self.status.phase not in TERMINAL_PHASES:
                self._flush()
