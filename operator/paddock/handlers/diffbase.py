"""kopf's record of the last handled spec, small enough for an annotation.

kopf keeps the whole last handled object (spec, labels, annotations) in one annotation to
tell a change from a replay. Annotations hold 256 KiB in all, and a Workspace may carry far
more (instructions, file skills): the record would not fit, kopf's patch would fail, and the
object would never be reconciled. Long strings are recorded by their SHA-256 instead: a
change of any of them still changes the record, which is all the handlers need (they are
level-based and never read the diff).

AgentRuns have no create, update or resume handler (a daemon drives each, and a delete
handler cleans up after it): a record would only cost each run a write, so none is kept, and
kopf sees a run as unchanged since it last looked."""

from __future__ import annotations

import hashlib
from typing import Any, cast

import kopf

LONG_STRING = 1024  # characters; longer strings are recorded by hash


def _compact(value: Any) -> Any:
    if isinstance(value, str) and len(value) > LONG_STRING:
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    if isinstance(value, dict):
        return {key: _compact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_compact(item) for item in value]
    return value


# Kinds whose handlers act on a change kopf tells from this record: create, update and resume
# handlers, and a timer, whose idle wait a change restarts.
RECORDED = {"Workspace", "SandboxPolicy", "Sandbox"}


class CompactDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """``AnnotationsDiffBaseStorage`` that stores long strings as their hashes, and nothing
    for the kinds outside ``RECORDED`` (AgentRun's only change handler is on delete).

    kopf builds the record of every event of every kind it watches, a deep copy of the whole
    object (its status and managed fields too) to keep the spec, labels and annotations: for
    the kinds outside ``RECORDED`` the record is empty, and for those it copies only what it
    keeps."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        if body.get("kind") not in RECORDED:
            return cast(kopf.BodyEssence, {})  # nothing kopf needs: no change to tell
        meta = body.get("metadata") or {}
        kept = {key: value for key, value in body.items() if key not in ("status", "metadata")}
        kept["metadata"] = {k: meta[k] for k in ("labels", "annotations") if k in meta}
        essence = super().build(body=kopf.Body(cast(kopf.RawBody, kept)), extra_fields=extra_fields)
        compact: kopf.BodyEssence = _compact(essence)
        return compact

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        if body.get("kind") not in RECORDED:
            return cast(kopf.BodyEssence, {})  # as built: no change to handle
        return super().fetch(body=body)

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        if body.get("kind") in RECORDED:
            super().store(body=body, patch=patch, essence=essence)
