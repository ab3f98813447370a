"""Reading a run's log back, from either backend: replay from a seq and, on request, follow
until the run ends. ``events`` picks the reader from the run's ``status.log``.

- ConfigMap: the log's chunks are listed once and then watched; the API server sends each
  chunk as it is written, so a follower reads every event once and sees a new one as soon as
  the run's write lands.
- Object store: the objects from the one holding ``from_seq`` are read once each. A bucket has
  no watch, so the follower watches the run instead: each status write that counts more events
  than it has read brings a listing of the objects after the last one read (no polling).
  Credentials are the reader's own, from the standard AWS chain (``AWS_ACCESS_KEY_ID``, ...,
  ``AWS_CA_BUNDLE`` for a private CA); the run's status says where the bucket is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from paddock.api.agentrun import TERMINAL_PHASES, LogBackend
from paddock.kube import client as kube
from paddock.kube import follow as following
from paddock.kube import watches
from paddock.objectstore import client as objectstore
from paddock.objectstore.client import GETS_AT_ONCE, S3Config
from paddock.objectstore.errors import ObjectStoreError
from paddock.runs import objectlog
from paddock.runs.events import TERMINAL_TYPES
from paddock.runs.log import chunk_selector, events_of, ordered_events

Obj = dict[str, Any]
# The server ends each watch after this long; the follower then checks the run still exists
# (a run deleted before its first event leaves no chunk to see go), and that its reader may
# still read it (``check``).
WATCH_SECONDS = 30


class RunNotFoundError(LookupError):
    pass


__all__ = ["ObjectStoreError", "RunNotFoundError", "events", "reader_for"]


class LogReader(Protocol):
    def events(self, cursor: _Cursor, follow: bool) -> Iterator[Obj]: ...


def events(
    namespace: str,
    name: str,
    from_seq: int = 0,
    *,
    follow: bool = False,
    check: Callable[[], None] | None = None,
) -> Iterator[Obj]:
    """Each event from ``from_seq`` on, once, in order. With ``follow``, keep reading until
    a terminal event has been given, calling ``check`` each time a watch ends (at most
    WATCH_SECONDS apart); ``RunNotFoundError`` when the run is (or goes) missing."""
    cursor = _Cursor(from_seq, check or _unchecked)
    run = _run(namespace, name)
    if follow and not _log_of(run):
        run = _located(run, cursor.check)
    yield from reader_for(run).events(cursor, follow)


def _unchecked() -> None:
    """Who reads may go on reading (a process reading with its own credentials)."""


def _log_of(run: Obj) -> Obj:
    log: Obj = (run.get("status") or {}).get("log") or {}
    return log


def _located(run: Obj, check: Callable[[], None]) -> Obj:
    """The run once its status says where its log is (its first status write), or once it
    has ended without one."""
    if _log_of(run) or _ended(run):
        return run
    for seen in _changes(run, check):
        if _log_of(seen) or _ended(seen):
            return seen
    raise AssertionError("unreachable: _changes ends only by raising")


def _changes(run: Obj, check: Callable[[], None]) -> Iterator[Obj]:
    """The run each time it changes after ``run`` (``kube.follow``: a watch of it, renewed
    each time the server ends it, with ``check`` called then; the run read again when the
    watch's version expired); ``RunNotFoundError`` when it is deleted."""
    meta = run["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]

    def listing() -> tuple[list[Obj], str]:
        found = _run(namespace, name, uid)
        return [found], str(found["metadata"]["resourceVersion"])

    for seen in following.follow(
        listing,
        lambda version: watches.watch_one("AgentRun", namespace, name, version, WATCH_SECONDS),
        renewed=_going_on(check),
        patience=following.PERSON_PATIENCE,
        since=str(meta["resourceVersion"]),
    ):
        if isinstance(seen, following.Listed):
            yield seen.objects[0]
            continue
        if seen.type == "DELETED" or seen.object["metadata"]["uid"] != uid:
            raise RunNotFoundError(f"AgentRun {name} was deleted")
        yield seen.object


def _going_on(check: Callable[[], None]) -> Callable[[], bool]:
    """Go on following once ``check`` passes (it raises once the reader may no more)."""

    def renewed() -> bool:
        check()
        return True

    return renewed


def reader_for(run: Obj) -> LogReader:
    where = _log_of(run)
    if where.get("backend") == LogBackend.S3:
        return ObjectReader(run, where)
    return ConfigMapReader(run)


class ConfigMapReader:
    def __init__(self, run: Obj) -> None:
        self.namespace = str(run["metadata"]["namespace"])
        self.name = str(run["metadata"]["name"])
        self.uid = str(run["metadata"]["uid"])

    def events(self, cursor: _Cursor, follow: bool) -> Iterator[Obj]:
        """A listing, then (following) its watch (``kube.follow``), each chunk's new events
        given once; a follower stops at the terminal event, or when the run ended without one
        (its log could not be written)."""
        selector = chunk_selector(self.uid)
        if not follow:
            configmaps, _ = watches.list_configmaps_at(self.namespace, selector)
            yield from cursor.new(ordered_events(configmaps))
            return

        def renewed() -> bool:
            cursor.check()
            return not _ended(_run(self.namespace, self.name, self.uid))

        for seen in following.follow(
            lambda: watches.list_configmaps_at(self.namespace, selector),
            lambda version: watches.watch_configmaps(
                self.namespace, selector, version, WATCH_SECONDS
            ),
            renewed=renewed,
            patience=following.PERSON_PATIENCE,
        ):
            if isinstance(seen, following.Listed):
                yield from cursor.new(ordered_events(seen.objects))
            elif seen.type == "DELETED":  # the log goes with its run
                _run(self.namespace, self.name, self.uid)
            else:
                yield from cursor.new(events_of(seen.object))
            if cursor.ended:
                return


class ObjectReader:
    """A run's log in a bucket, read with the keys this process was given (AWS_ACCESS_KEY_ID
    and AWS_SECRET_ACCESS_KEY) and no others: never the SDK's default chain, whose last resort
    is an instance-metadata address outside the cluster."""

    def __init__(self, run: Obj, where: Obj) -> None:
        self.run = run
        bucket, _, self.prefix = str(where["location"]).removeprefix("s3://").partition("/")
        key_id = os.environ.get("AWS_ACCESS_KEY_ID")
        secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
        if not (key_id and secret):
            raise ObjectStoreError(
                f"the run's log is in s3://{bucket}/{self.prefix} and no object-store keys are "
                "set here: export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (keys that may "
                "read that bucket)"
            )
        self.bucket = objectstore.bucket(
            S3Config(
                bucket=bucket,
                endpoint=where.get("endpoint"),
                region=where.get("region") or "us-east-1",
                path_style=bool(where.get("pathStyle")),
                access_key_id=key_id,
                secret_access_key=secret,
                ca_file=os.environ.get("AWS_CA_BUNDLE") or None,
            )
        )
        self.last_key: str | None = None

    def events(self, cursor: _Cursor, follow: bool) -> Iterator[Obj]:
        yield from self._new(cursor)
        if not follow or cursor.ended:
            return
        for run in _changes(self.run, cursor.check):
            count = int((run.get("status") or {}).get("eventCount") or 0)
            if count > cursor.next_seq or _ended(run):
                yield from self._new(cursor)
            if cursor.ended or _ended(run):
                return  # ended, with its last event or without (its log could not be written)

    def _new(self, cursor: _Cursor) -> Iterator[Obj]:
        """The events of the objects after the last one read (the first time: from the one
        holding the cursor's seq)."""
        keys = [listed.key for listed in self.bucket.listing(self.prefix, after=self.last_key)]
        if self.last_key is None:
            keys = objectlog.keys_from(keys, cursor.next_seq)
        for start in range(0, len(keys), GETS_AT_ONCE):  # in parallel, a page at a time
            page = keys[start : start + GETS_AT_ONCE]
            for key, (data, _metadata) in zip(page, self.bucket.get_many(page), strict=True):
                self.last_key = key
                yield from cursor.new(objectlog.events_of(data))


def _ended(run: Obj) -> bool:
    return (run.get("status") or {}).get("phase") in TERMINAL_PHASES


def _run(namespace: str, name: str, uid: str | None = None) -> Obj:
    run = kube.get("AgentRun", namespace, name)
    if run is None or uid not in (None, run["metadata"]["uid"]):
        raise RunNotFoundError(f"AgentRun {name} not found in namespace {namespace}")
    return run


class _Cursor:
    """How far the reader has given events: each seq once, in order, from the first asked."""

    def __init__(self, from_seq: int, check: Callable[[], None]) -> None:
        self.next_seq = from_seq
        self.ended = False
        self.check = check

    def new(self, events: Iterable[Obj]) -> Iterator[Obj]:
        for event in events:
            self.ended = self.ended or event["type"] in TERMINAL_TYPES
            if event["seq"] >= self.next_seq:
                self.next_seq = event["seq"] + 1
                yield event
