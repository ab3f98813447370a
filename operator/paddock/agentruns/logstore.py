"""Which log a run writes, and where its objects go when it is deleted.

A run keeps the backend its status names (it started with it); a new run takes the operator's
``log_backend``. The bucket's client is made once per configuration and shared."""

from __future__ import annotations

import contextlib
from typing import Any

from paddock.api.agentrun import AgentRunStatus, LogBackend
from paddock.api.common import stored_status
from paddock.api.conditions import Notice, set_condition
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.errors import KubeError
from paddock.objectstore.client import S3Config, bucket, configured_store
from paddock.objectstore.errors import (
    ObjectStoreDeniedError,
    ObjectStoreError,
    ObjectStoreNotFoundError,
)
from paddock.runs.events import RunSummary
from paddock.runs.log import ConfigMapLog, RunLog
from paddock.runs.objectlog import ObjectLog, run_prefix
from paddock.settings import OperatorSettings
from paddock.settings.groups import S3Settings
from paddock.times import utcnow

Obj = dict[str, Any]
RUNS = "runs"


class LogStoreNotConfiguredError(ObjectStoreError):
    """A run's log is in an object store this operator has no settings for."""


def s3_config(s3: S3Settings) -> S3Config:
    config = configured_store(s3.store())
    if config is None:
        raise LogStoreNotConfiguredError(
            "this run's log is in an object store, and the operator has no s3_bucket setting "
            "(PADDOCK_S3_BUCKET) to reach it"
        )
    return config


def backend_of(run: Obj, settings: OperatorSettings) -> LogBackend:
    stored = ((run.get("status") or {}).get("log") or {}).get("backend")
    return LogBackend(stored or settings.logs.backend)


def load_log(run: Obj, settings: OperatorSettings) -> tuple[RunLog, RunSummary, dict[str, int]]:
    """The run's log, what it holds so far, and its cursor (raised when it cannot be read)."""
    try:
        run_log = open_log(run, settings)
        events, cursor = run_log.load()
    except ObjectStoreError as exc:
        raise unreadable(run, exc) from exc
    summary = RunSummary()
    summary.add_all(events)
    return run_log, summary, cursor


def open_log(run: Obj, settings: OperatorSettings) -> RunLog:
    if backend_of(run, settings) == LogBackend.S3:
        return ObjectLog(run, bucket(s3_config(settings.s3)), logs_prefix(settings))
    return ConfigMapLog(run, kube)


def logs_prefix(settings: OperatorSettings) -> str:
    return f"{settings.s3.prefix.strip('/')}/{RUNS}".lstrip("/")


def delete_log(run: Obj, settings: OperatorSettings) -> int:
    """Delete a deleted run's log objects (its ConfigMaps go by garbage collection) unless the
    settings keep them; how many were deleted. Raises ``ObjectStoreError`` for a retry."""
    if backend_of(run, settings) != LogBackend.S3 or settings.logs.keep_after_delete:
        return 0
    store = bucket(s3_config(settings.s3))
    keys = [listed.key for listed in store.listing(run_prefix(logs_prefix(settings), run))]
    if keys:
        store.delete(keys)
    return len(keys)


def reason_of(exc: ObjectStoreError) -> R:
    """The run's reason for a store's answer."""
    if isinstance(exc, ObjectStoreDeniedError):
        return R.LOG_STORE_DENIED
    if isinstance(exc, ObjectStoreNotFoundError | LogStoreNotConfiguredError):
        return R.LOG_STORE_NOT_FOUND
    return R.LOG_STORE_UNAVAILABLE


class LogUnreadableError(Exception):
    """The run's log could not be read, so the run cannot go on yet: said on the run as a
    condition, and by the Event of ``notice``."""

    def __init__(self, notice: Notice) -> None:
        super().__init__(notice.message)
        self.notice = notice


def unreadable(run: Obj, exc: ObjectStoreError) -> LogUnreadableError:
    """Set ``Progressing=False`` with the store's answer (only the condition: the rest of the
    status stays as the last step wrote it) and give the Event to post."""
    reason = reason_of(exc)
    message = f"The run's event log could not be read from the object store: {exc.message}"
    message += "; retrying."
    status = stored_status(AgentRunStatus, run)
    conditions = set_condition(
        status.conditions,
        C.PROGRESSING,
        False,
        reason,
        message,
        generation=run["metadata"].get("generation"),
        now=utcnow(),
    )
    if conditions != status.conditions:
        status.conditions = conditions
        meta = run["metadata"]
        with contextlib.suppress(KubeError):
            patch = {"conditions": status.to_api()["conditions"]}
            kube.patch_status("AgentRun", meta["namespace"], meta["name"], patch)
    return LogUnreadableError(Notice(reason, message))


def refusal(exc: KubeError | ObjectStoreError) -> tuple[R, str]:
    """The reason and message of a refusal by the API server or the log's object store."""
    if isinstance(exc, KubeError):
        return R.API_REFUSED, f"The API server refused a request: {exc.message}"
    message = f"The run's event log could not be written to the object store: {exc.message}"
    return reason_of(exc), message
