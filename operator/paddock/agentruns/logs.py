"""Reading a run's log back: replay from a seq and, on request, follow until the run ends.

Following lists the log's chunks once and then watches them: the API server sends each chunk
as it is written, so a follower reads every event once, whatever the log's length, and sees a
new one as soon as the run's write lands (no polling)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from paddock.api.agentrun import TERMINAL_PHASES
from paddock.kube import client as kube
from paddock.runs.events import TERMINAL_TYPES
from paddock.runs.log import chunk_selector, events_of, ordered_events

Obj = dict[str, Any]
# The server ends each watch after this long; the follower then checks the run still exists
# (a run deleted before its first event leaves no chunk to see go).
WATCH_SECONDS = 30


class RunNotFoundError(LookupError):
    pass


def events(namespace: str, name: str, from_seq: int = 0, *, follow: bool = False) -> Iterator[Obj]:
    """Each event from ``from_seq`` on, once, in order. With ``follow``, keep reading until
    a terminal event has been given; ``RunNotFoundError`` when the run is (or goes) missing."""
    uid = str(_run(namespace, name)["metadata"]["uid"])
    cursor = _Cursor(from_seq)
    while True:  # a listing, then its watch; again when the watch's start has expired
        configmaps, version = kube.list_configmaps_at(namespace, chunk_selector(uid))
        yield from cursor.new(ordered_events(configmaps))
        if not follow or cursor.ended:
            return
        try:
            yield from _watched(namespace, name, uid, version, cursor)
            return
        except kube.WatchExpiredError:
            continue


def _watched(namespace: str, name: str, uid: str, version: str, cursor: _Cursor) -> Iterator[Obj]:
    selector = chunk_selector(uid)
    while True:
        for kind, configmap in kube.watch_configmaps(namespace, selector, version, WATCH_SECONDS):
            version = configmap["metadata"]["resourceVersion"]
            if kind == "DELETED":  # the log goes with its run
                _run(namespace, name, uid)
                continue
            yield from cursor.new(events_of(configmap))
            if cursor.ended:
                return
        if (_run(namespace, name, uid).get("status") or {}).get("phase") in TERMINAL_PHASES:
            return  # ended without a last event (its log could not be written)


def _run(namespace: str, name: str, uid: str | None = None) -> Obj:
    run = kube.get("AgentRun", namespace, name)
    if run is None or uid not in (None, run["metadata"]["uid"]):
        raise RunNotFoundError(f"AgentRun {name} not found in namespace {namespace}")
    return run


class _Cursor:
    """How far the follower has given events: each seq once, in order, from the first asked."""

    def __init__(self, from_seq: int) -> None:
        self.next_seq = from_seq
        self.ended = False

    def new(self, events: Iterable[Obj]) -> Iterator[Obj]:
        for event in events:
            self.ended = self.ended or event["type"] in TERMINAL_TYPES
            if event["seq"] >= self.next_seq:
                self.next_seq = event["seq"] + 1
                yield event
