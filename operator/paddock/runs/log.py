"""A run's full event log, kept in ConfigMaps owned by the run.

The log is a series of chunks ``<run>-log-00000``, ``-00001``, ...: each a ConfigMap whose
``events.jsonl`` holds whole events, one JSON object a line, in seq order. A chunk takes batches
until it would pass ``CHUNK_LIMIT`` (well under the API server's 1 MiB object limit); then a new
chunk starts. Every write also stores the journal *cursor* (how far into the harness's journals
the events reach) on the chunk it writes, in the same object, so the events and the cursor
move together: an operator that stops at any moment finds the log and the cursor agreeing, and
resumes with nothing lost and nothing twice. Writes carry the resourceVersion they read, so two
writers cannot both append.

The ConfigMaps are read and written through a ``ConfigMapStore`` the caller gives (the
Kubernetes client, in the operator): this module decides what to write, and holds no client.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from paddock import GROUP, metrics
from paddock.api.agentrun import LogBackend, LogLocation
from paddock.runs.events import encode
from paddock.vocab.names import MANAGED_BY
from paddock.vocab.ownership import controller_reference

CHUNK_LIMIT = 512 * 1024
DATA_KEY = "events.jsonl"
RUN_UID_LABEL = f"{GROUP}/run-uid"
CHUNK_ANNOTATION = f"{GROUP}/chunk"
CURSOR_ANNOTATION = f"{GROUP}/cursor"

Obj = dict[str, Any]


class ConfigMapStore(Protocol):
    """Where a log's chunks are kept: ``paddock.kube.client`` in the operator."""

    def list_configmaps(self, namespace: str, selector: str) -> list[Obj]: ...

    def create_configmap(self, obj: Obj) -> Obj: ...

    def replace_configmap(self, obj: Obj) -> Obj: ...


class RunLog(Protocol):
    """What the writer of a run's log needs of either backend (this ConfigMap log, or
    ``objectlog.ObjectLog``)."""

    writes: int

    def where(self) -> LogLocation: ...

    def load(self) -> tuple[list[Obj], dict[str, int]]: ...

    def append(self, events: list[Obj], cursor: dict[str, int]) -> None: ...


def chunk_name(run_name: str, index: int) -> str:
    base = run_name
    if len(base) > 230:  # leave room for the suffix within the 253-character limit
        base = base[:220] + "-" + hashlib.sha256(run_name.encode()).hexdigest()[:8]
    return f"{base}-log-{index:05d}"


def chunk_index(configmap: Obj) -> int:
    return int(configmap["metadata"]["annotations"][CHUNK_ANNOTATION])


def events_of(configmap: Obj) -> list[Obj]:
    text = (configmap.get("data") or {}).get(DATA_KEY, "")
    return [json.loads(line) for line in text.splitlines() if line]


def ordered_events(configmaps: list[Obj]) -> list[Obj]:
    """All events of a log's chunks, in seq order; raises when a seq is missing or repeated,
    which would mean the log was edited by hand."""
    events = [e for cm in sorted(configmaps, key=chunk_index) for e in events_of(cm)]
    for expected, event in enumerate(events):
        if event["seq"] != expected:
            raise ValueError(f"the log has seq {event['seq']} where {expected} was expected")
    return events


def chunk_selector(run_uid: str) -> str:
    return f"{RUN_UID_LABEL}={run_uid}"


def read_log(store: ConfigMapStore, namespace: str, run_uid: str) -> list[Obj]:
    return ordered_events(store.list_configmaps(namespace, chunk_selector(run_uid)))


@dataclass
class _Chunk:
    index: int
    configmap: Obj
    size: int


@dataclass
class ConfigMapLog:
    """The writer's view of one run's log."""

    run: Obj
    store: ConfigMapStore
    writes: int = 0
    _chunk: _Chunk | None = field(default=None, repr=False)

    @property
    def namespace(self) -> str:
        return str(self.run["metadata"]["namespace"])

    @property
    def location(self) -> str:
        return chunk_name(self.run["metadata"]["name"], 0).removesuffix("-00000")

    def where(self) -> LogLocation:
        return LogLocation(backend=LogBackend.CONFIGMAP, location=self.location)

    def load(self) -> tuple[list[Obj], dict[str, int]]:
        """Every event so far, and the cursor stored with the last write."""
        uid = self.run["metadata"]["uid"]
        configmaps = self.store.list_configmaps(self.namespace, chunk_selector(uid))
        events = ordered_events(configmaps)
        if not configmaps:
            self._chunk = None
            return events, {}
        last = max(configmaps, key=chunk_index)
        text = (last.get("data") or {}).get(DATA_KEY, "")
        self._chunk = _Chunk(chunk_index(last), last, len(text.encode()))
        annotations = last["metadata"].get("annotations") or {}
        cursor: dict[str, int] = json.loads(annotations.get(CURSOR_ANNOTATION) or "{}")
        return events, cursor

    def next_chunk_name(self) -> str:
        """The name the next new chunk gets (a write that starts a chunk creates it)."""
        index = 0 if self._chunk is None else self._chunk.index + 1
        return chunk_name(self.run["metadata"]["name"], index)

    def append(self, events: list[Obj], cursor: dict[str, int]) -> None:
        """Append a batch and store the cursor with it, in one write."""
        text = "".join(encode(event) + "\n" for event in events)
        size = len(text.encode())
        chunk = self._chunk
        if chunk is None or (chunk.size > 0 and chunk.size + size > CHUNK_LIMIT):
            index = 0 if chunk is None else chunk.index + 1
            created = self.store.create_configmap(self._new_chunk(index, text, cursor))
            self._chunk = _Chunk(index, created, size)
        else:
            configmap = dict(chunk.configmap)
            metadata = dict(configmap["metadata"])
            metadata["annotations"] = {
                **(metadata.get("annotations") or {}),
                CURSOR_ANNOTATION: json.dumps(cursor, sort_keys=True),
            }
            old = (configmap.get("data") or {}).get(DATA_KEY, "")
            configmap["metadata"], configmap["data"] = metadata, {DATA_KEY: old + text}
            self._chunk = _Chunk(
                chunk.index, self.store.replace_configmap(configmap), chunk.size + size
            )
        self.writes += 1
        metrics.LOG_BYTES.labels("configmap").inc(size)

    def _new_chunk(self, index: int, text: str, cursor: dict[str, int]) -> Obj:
        meta = self.run["metadata"]
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": chunk_name(meta["name"], index),
                "namespace": meta["namespace"],
                "labels": {**MANAGED_BY, RUN_UID_LABEL: meta["uid"]},
                "annotations": {
                    CHUNK_ANNOTATION: str(index),
                    CURSOR_ANNOTATION: json.dumps(cursor, sort_keys=True),
                },
                "ownerReferences": [controller_reference(self.run)],
            },
            "data": {DATA_KEY: text},
        }
