"""A run's durable record, as one step writes it: the events appended to its log (with the
journal cursor they were read up to) and the status patched with only what changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from paddock import metrics
from paddock.agentruns import decide, inputs
from paddock.api.agentrun import AgentRunStatus, RunPhase
from paddock.api.conditions import Notice, set_condition
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.errors import ConflictError
from paddock.render.ownership import controlled_by
from paddock.runs import events as ev
from paddock.runs.events import Draft, RunSummary
from paddock.runs.log import ConfigMapLog, RunLog
from paddock.runs.scrubbing import Scrubber
from paddock.times import utcnow

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

    @property
    def namespace(self) -> str:
        return str(self.run["metadata"]["namespace"])

    @property
    def run_id(self) -> str:
        return str(self.run["metadata"]["uid"])

    def _append(self, drafts: list[Draft], cursor: dict[str, int] | None = None) -> None:
        when = ev.now()
        events = [
            ev.stamp(draft, self.summary.next_seq + i, when, self.scrubber)
            for i, draft in enumerate(drafts)
        ]
        cursor = self.cursor if cursor is None else cursor
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
        self.summary.add_all(events)

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

    def _flush(self) -> None:
        """Write what changed in the status since it was last written."""
        self.status.observed_generation = self.run["metadata"].get("generation")
        decide.summarise(self.status, self.summary, self.log.where())
        new = self.status.to_api()
        patch = {key: value for key, value in new.items() if self.written.get(key) != value}
        if patch:
            meta = self.run["metadata"]
            stored = kube.patch_status("AgentRun", meta["namespace"], meta["name"], patch)
            self.written |= patch
            if stored is not None:  # the runs of its sandbox see it at once, not at its event
                inputs.seen("MODIFIED", stored)
