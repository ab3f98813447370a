"""A run's full event log in an object store (S3): one object a write, as S3 has no append.

The objects of a run are ``<prefix>/<namespace>/<run>/<uid>/<first seq>.jsonl``, the first seq
zero-padded so that key order is seq order: each holds one batch of whole events, a JSON object
a line, and carries the journal *cursor* of that batch as its user metadata. An object appears
whole or not at all, so the events and the cursor move together, as in the ConfigMap log: an
operator that stops at any moment finds the last object's cursor agreeing with the events, and
resumes with nothing lost and nothing twice. Each object is created only if absent, so two
writers cannot both append the same seq.

The bucket is reached through an ``ObjectBucket`` the caller gives (``paddock.objectstore``,
in the operator); this module decides what to write and read, and holds no client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from paddock import metrics
from paddock.api.agentrun import LogBackend, LogLocation
from paddock.runs.events import encode

CURSOR_METADATA = "cursor"
SEQ_DIGITS = 12

Obj = dict[str, Any]


class Listed(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def size(self) -> int: ...


class Place(Protocol):
    """Where the bucket is (``paddock.objectstore.client.S3Config``); nothing secret is read."""

    @property
    def bucket(self) -> str: ...

    @property
    def endpoint(self) -> str | None: ...

    @property
    def region(self) -> str: ...

    @property
    def path_style(self) -> bool: ...


class ObjectBucket(Protocol):
    """Where a log's objects are kept: ``paddock.objectstore.client.Bucket`` in the operator."""

    @property
    def config(self) -> Place: ...

    def create(self, key: str, data: bytes, metadata: dict[str, str]) -> None: ...

    def get(self, key: str) -> tuple[bytes, dict[str, str]]: ...

    def get_many(self, keys: list[str]) -> list[tuple[bytes, dict[str, str]]]: ...

    def listing(self, prefix: str, after: str | None = None) -> list[Any]: ...

    def delete(self, keys: list[str]) -> None: ...


def run_prefix(prefix: str, run: Obj) -> str:
    """The key prefix of one run's objects: its namespace, name and UID (a run made again
    under the same name gets its own)."""
    meta = run["metadata"]
    head = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return f"{head}{meta['namespace']}/{meta['name']}/{meta['uid']}/"


def object_key(run_prefix_: str, first_seq: int) -> str:
    return f"{run_prefix_}{first_seq:0{SEQ_DIGITS}d}.jsonl"


def first_seq(key: str) -> int:
    return int(key.rsplit("/", 1)[-1].removesuffix(".jsonl"))


def keys_from(keys: list[str], from_seq: int) -> list[str]:
    """The keys whose objects hold ``from_seq`` and later: the last one starting at or before
    it, and every one after."""
    ordered = sorted(keys)
    start = 0
    for index, key in enumerate(ordered):
        if first_seq(key) <= from_seq:
            start = index
    return ordered[start:]


def events_of(data: bytes) -> list[Obj]:
    return [json.loads(line) for line in data.decode().splitlines() if line]


def check_order(events: list[Obj], start: int) -> None:
    """Raises when a seq is missing or repeated, which would mean the log was edited."""
    for expected, event in enumerate(events, start):
        if event["seq"] != expected:
            raise ValueError(f"the log has seq {event['seq']} where {expected} was expected")


@dataclass
class ObjectLog:
    """The writer's view of one run's log in a bucket."""

    run: Obj
    bucket: ObjectBucket
    prefix: str
    writes: int = 0
    _next_seq: int = field(default=0, repr=False)

    @property
    def key_prefix(self) -> str:
        return run_prefix(self.prefix, self.run)

    @property
    def location(self) -> str:
        return f"s3://{self.bucket.config.bucket}/{self.key_prefix}"

    def where(self) -> LogLocation:
        config = self.bucket.config
        return LogLocation(
            backend=LogBackend.S3,
            location=self.location,
            endpoint=config.endpoint,
            region=config.region,
            path_style=config.path_style,
        )

    def load(self) -> tuple[list[Obj], dict[str, int]]:
        """Every event so far, and the cursor stored with the last write."""
        keys = sorted(listed.key for listed in self.bucket.listing(self.key_prefix))
        events: list[Obj] = []
        cursor: dict[str, int] = {}
        for data, metadata in self.bucket.get_many(keys):
            events.extend(events_of(data))
            cursor = json.loads(metadata.get(CURSOR_METADATA) or "{}")
        check_order(events, 0)
        self._next_seq = len(events)
        return events, cursor

    def append(self, events: list[Obj], cursor: dict[str, int]) -> None:
        """Store a batch with its cursor as one new object; ``ObjectExistsError`` (from the
        bucket) when another writer stored that seq first. A batch of no events writes nothing:
        its object would take the key (the next seq) the next batch needs. The cursor it
        carries is stored with the next batch; until then, an operator that restarts reads the
        journal again from the stored cursor, and those bytes again make no events."""
        if not events:
            return
        data = "".join(encode(event) + "\n" for event in events).encode()
        metadata = {CURSOR_METADATA: json.dumps(cursor, sort_keys=True)}
        self.bucket.create(object_key(self.key_prefix, self._next_seq), data, metadata)
        self._next_seq += len(events)
        self.writes += 1
        metrics.LOG_BYTES.labels("s3").inc(len(data))
