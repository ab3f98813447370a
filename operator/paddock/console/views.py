"""What each page of the console shows, from the objects and events it is given: rows of runs,
sandboxes and pools, a run's timeline items and its approval requests. Pure: the pages' data,
tested without a browser; the templates only lay it out (escaped by Jinja2)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from paddock.api.agentrun import RunPhase
from paddock.api.approvals import DECIDED_BY_ANNOTATION, ApprovalState, digest_of, visible
from paddock.runs import events as ev

Obj = dict[str, Any]
ENDED = ("Succeeded", "Failed", "Cancelled", "TimedOut")
MAX_SHOWN = 20_000  # characters of one folded body (a tool's output, a diff) shown at most


def age(created: str | None, now: datetime) -> str:
    """How long ago ``created`` (an RFC 3339 time) was, as kubectl prints it: 45s, 12m, 3h, 2d."""
    if not created:
        return ""
    seconds = max(int((now - datetime.fromisoformat(created)).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class RunRow:
    name: str
    phase: str
    reason: str
    harness: str
    sandbox: str
    waiting: int  # approval requests pending
    tokens: int | None
    cost_usd: float | None
    age: str
    delivered_branch: str | None = None  # where its work was pushed (spec.deliver)
    pull_request: str | None = None  # its pull request's page, an http(s) URL


def run_row(run: Obj, now: datetime) -> RunRow:
    meta, spec, status = run["metadata"], run.get("spec") or {}, run.get("status") or {}
    usage = status.get("usage") or {}
    pending = [a for a in status.get("approvals") or [] if a.get("state") == ApprovalState.PENDING]
    return RunRow(
        name=meta["name"],
        phase=status.get("phase") or "Pending",
        reason=_reason(status),
        harness=spec.get("harness") or "",
        sandbox=status.get("sandboxName") or (spec.get("sandboxRef") or {}).get("name") or "",
        waiting=len(pending),
        tokens=usage.get("tokens"),
        cost_usd=usage.get("costUsd"),
        age=age(meta.get("creationTimestamp"), now),
        delivered_branch=(status.get("delivery") or {}).get("branch"),
        pull_request=_web_link((status.get("delivery") or {}).get("pullRequestUrl")),
    )


def _web_link(url: object) -> str | None:
    """A URL to link to: http or https only (never javascript: or data:)."""
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def _reason(status: Obj) -> str:
    """Why the run is where it is: the reason of its Complete condition once it has ended,
    else of the condition holding it back (the first that is not True)."""
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    complete = conditions.get("Complete")
    if (complete is not None and complete.get("status") == "True") or status.get("phase") in ENDED:
        return str((complete or {}).get("reason") or "")
    waiting = [c for c in conditions.values() if c.get("status") != "True"]
    return str(waiting[0].get("reason") or "") if waiting else ""


PHASES = tuple(str(phase) for phase in RunPhase)  # what the runs page filters by
PAGE_ROWS = 50  # runs a page of the runs list shows


@dataclass(frozen=True)
class RunFilter:
    """What the runs page shows: a phase, a harness, and a part of the name (each optional),
    and which page of PAGE_ROWS rows (from 1)."""

    phase: str = ""
    harness: str = ""
    text: str = ""
    page: int = 1

    def keeps(self, row: RunRow) -> bool:
        return (
            (not self.phase or row.phase == self.phase)
            and (not self.harness or row.harness == self.harness)
            and self.text.lower() in row.name.lower()
        )


def run_rows(runs: Iterable[Obj], now: datetime, shown: RunFilter) -> list[RunRow]:
    """The rows of the runs given (newest first, as given) that the filter keeps."""
    return [row for row in (run_row(r, now) for r in runs) if shown.keeps(row)]


@dataclass(frozen=True)
class RunPage:
    """One page of the runs list: its rows, which page it is, and how many there are."""

    rows: list[RunRow]
    page: int
    pages: int
    total: int


def run_page(runs: Iterable[Obj], now: datetime, shown: RunFilter) -> RunPage:
    """The page of the filtered rows the filter names (the last one when it names a page past
    the end)."""
    rows = run_rows(runs, now, shown)
    pages = max((len(rows) + PAGE_ROWS - 1) // PAGE_ROWS, 1)
    page = min(max(shown.page, 1), pages)
    start = (page - 1) * PAGE_ROWS
    return RunPage(rows[start : start + PAGE_ROWS], page, pages, len(rows))


def changed_rows(before: RunPage | None, after: RunPage) -> list[RunRow] | None:
    """What a live runs list must be sent after a change: None, the whole table (its rows,
    their order or its page count changed); else only the rows that changed (none: nothing to
    send). A row's age alone is no change."""
    if before is None or (before.page, before.pages, before.total) != (
        after.page,
        after.pages,
        after.total,
    ):
        return None
    if [r.name for r in before.rows] != [r.name for r in after.rows]:
        return None
    return [
        new
        for old, new in zip(before.rows, after.rows, strict=True)
        if replace(old, age="") != replace(new, age="")
    ]


@dataclass(frozen=True)
class Request:
    """One approval request, as the run page lists it."""

    id: str
    kind: str
    target: str  # as every face shows it: whole while pending, code points made visible
    digest: str  # of the text itself, which a decision names
    rules: tuple[str, ...]
    state: str
    message: str
    decided_by: str | None


def requests(run: Obj) -> list[Request]:
    """The run's approval requests, pending first, then the decided ones newest first."""
    annotations = run["metadata"].get("annotations") or {}
    listed = [
        Request(
            id=str(a["id"]),
            kind=str(a.get("kind") or "command"),
            target=visible(str(a.get("target") or "")),
            digest=digest_of(str(a.get("target") or "")),
            rules=tuple(a.get("rules") or ()),
            state=str(a.get("state") or ""),
            message=str(a.get("message") or ""),
            decided_by=annotations.get(f"{DECIDED_BY_ANNOTATION}{a['id']}"),
        )
        for a in (run.get("status") or {}).get("approvals") or []
    ]
    pending = [r for r in listed if r.state == ApprovalState.PENDING]
    decided = [r for r in listed if r.state != ApprovalState.PENDING]
    return pending + decided[::-1]


@dataclass(frozen=True)
class Waiting:
    """A pending request, as the approvals page lists it: with its run."""

    run: str
    request: Request


def waiting(runs: Iterable[Obj]) -> list[Waiting]:
    """Every pending request of the runs given, in their order (newest run first)."""
    return [
        Waiting(run["metadata"]["name"], r)
        for run in runs
        for r in requests(run)
        if r.state == ApprovalState.PENDING
    ]


@dataclass(frozen=True)
class Item:
    """One entry of a run's timeline. ``folded`` is shown on request (a tool's input or output,
    a diff); ``style`` names what it is for the page (message, tool, policy, file, end...)."""

    seq: int
    clock: str
    type: str
    style: str
    title: str
    text: str = ""
    folded: str = ""
    files: tuple[str, ...] = field(default_factory=tuple)


STYLES = {
    ev.MESSAGE: "message", ev.TOOL_CALL: "tool", ev.TOOL_RESULT: "tool", ev.OUTPUT: "output",
    ev.POLICY_DENIED: "policy", ev.APPROVAL_REQUESTED: "policy", ev.APPROVAL_RESOLVED: "policy",
    ev.FILE_CHANGED: "file", ev.ERROR: "error", ev.RUN_FAILED: "end", ev.RUN_ABORTED: "end",
    ev.RUN_COMPLETED: "end", ev.RESULT: "result", ev.USAGE: "usage",
    ev.RUN_DELIVERED: "result", ev.RUN_UNDELIVERED: "error",
}  # fmt: skip


def item(event: Obj) -> Item:
    """The timeline entry of one run event (its text already scrubbed by the operator)."""
    kind, data = str(event["type"]), event.get("data") or {}
    summary = str(event.get("summary") or "")
    base = Item(
        seq=int(event["seq"]),
        clock=str(event.get("time", ""))[11:19],
        type=kind,
        style=STYLES.get(kind, "notice"),
        title=kind,
        text=summary,
    )
    if kind == ev.MESSAGE:
        return replace(base, title="message", text=str(data.get("text") or summary))
    if kind == ev.OUTPUT:
        return replace(base, title="output", text=str(data.get("text") or ""))
    if kind == ev.TOOL_CALL:
        arguments = json.dumps(data.get("input"), indent=2, ensure_ascii=False)
        return replace(base, title=f"tool call: {summary}", text="", folded=_bounded(arguments))
    if kind == ev.TOOL_RESULT:
        output = str(data.get("output") or summary)
        title = "tool error" if data.get("isError") else "tool result"
        return replace(base, title=title, text=_first_line(output), folded=_bounded(output))
    if kind == ev.FILE_CHANGED:
        changed = data.get("files") or []
        files = tuple(f"{f.get('status', '')} {f.get('path', '')}" for f in changed)
        diff = _bounded(str(data.get("diff") or ""))
        return replace(base, title=summary, text="", files=files, folded=diff)
    return base


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= 200 else line[:199] + "…"


def _bounded(text: str) -> str:
    if len(text) <= MAX_SHOWN:
        return text
    return text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters: paddock logs)"


@dataclass(frozen=True)
class SandboxRow:
    name: str
    phase: str
    reason: str
    workspace: str
    policy: str
    restored_from: str
    age: str


def sandbox_row(sandbox: Obj, now: datetime) -> SandboxRow:
    meta, spec, status = sandbox["metadata"], sandbox.get("spec") or {}, sandbox.get("status") or {}
    return SandboxRow(
        name=meta["name"],
        phase=status.get("phase") or "Pending",
        reason=status.get("reason") or "",
        workspace=(spec.get("workspaceRef") or {}).get("name") or "",
        policy=status.get("policy") or "none",
        restored_from=status.get("restoredFrom") or "",
        age=age(meta.get("creationTimestamp"), now),
    )


@dataclass(frozen=True)
class PoolRow:
    name: str
    workspace: str
    desired: int
    ready: int
    members: int
    claimed: int


def pool_row(pool: Obj) -> PoolRow:
    spec, status = pool.get("spec") or {}, pool.get("status") or {}
    template = spec.get("template") or {}
    return PoolRow(
        name=pool["metadata"]["name"],
        workspace=(template.get("workspaceRef") or {}).get("name") or "",
        desired=int(spec.get("replicas") or 0),
        ready=int(status.get("readyReplicas") or 0),
        members=int(status.get("replicas") or 0),
        claimed=int(status.get("claimed") or 0),
    )
