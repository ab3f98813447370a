"""AgentRun: one daemon per active run drives it to its end; deleting a running run kills its
processes first."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

import kopf

from paddock import GROUP, VERSION, metrics
from paddock.agentruns import (
    credential_access,
    host_asks,
    in_pod,
    inputs,
    lifetime,
    logstore,
    model_access,
    spending,
)
from paddock.agentruns.execution import Execution
from paddock.agentruns.logstore import LogUnreadableError
from paddock.api.agentrun import TERMINAL_PHASES
from paddock.api.conditions import Notice
from paddock.api.reasons import RunReason
from paddock.runs import events as ev

MAX_BACKOFF_SECONDS = 30.0
STEP_GAP_SECONDS = 0.2  # a run's steps at most this often, however much its stream says
WRITE_GAP_SECONDS = 1.0  # journal bytes alone are appended at most this often (``News``)
T = TypeVar("T")
# The running runs' daemons, by run uid: wake one to step its run at once.
WAKERS: dict[str, Callable[[bool], None]] = {}
# What a person or a spec may have changed of each run (generation, annotations), as last seen.
ASKED: dict[str, tuple[object, str]] = {}


class RunThreads:
    """The threads run steps take. A run's steps until its harness has started have threads
    of their own: a new run's take and launch never wait behind the polls of running runs.
    Runs arrive in bursts (a pool's takers), each start a few short requests in a row: more
    threads start runs than follow them (idle, a thread costs nothing)."""

    def __init__(self, starting: int, running: int) -> None:
        self.starting = ThreadPoolExecutor(starting, "paddock-run-start")
        self.running = ThreadPoolExecutor(running, "paddock-run")

    async def call(self, execution: Execution | None, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread for the run's stage, in this context (as ``to_thread``)."""
        started = execution is not None and ev.RUN_STARTED in execution.summary.types_seen
        pool = self.running if started else self.starting
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(pool, context.run, fn, *args)

    def stop(self) -> None:
        for pool in (self.starting, self.running):
            pool.shutdown(wait=False, cancel_futures=True)


@kopf.daemon(GROUP, VERSION, "agentruns", cancellation_timeout=10)
async def run_daemon(
    body: kopf.Body, stopped: kopf.DaemonStopped, memo: kopf.Memo, logger: Any, **_: Any
) -> None:
    """Step the run until it ends, then keep it for its time to live. A failed step is logged
    and retried from durable state (the log, its cursor and the status), with a growing pause;
    it never ends the daemon.

    No ``when`` filter on the phase: kopf would cancel the daemon the moment its own final
    status patch lands. A finished run's daemon only waits out its time to live (or returns
    at once when it is kept), and kopf does not start it again for that run."""
    if (body.get("status") or {}).get("phase") in TERMINAL_PHASES:
        await _keep(body, memo, stopped, logger)
        return
    uid, news = str(body["metadata"]["uid"]), News(asyncio.get_running_loop())
    WAKERS[uid] = news.wake
    try:
        ended, completed_at = await _drive(body, memo, stopped, logger, news)
    finally:
        WAKERS.pop(uid, None)
    if ended:
        await _keep(body, memo, stopped, logger, completed_at)


async def _drive(
    body: kopf.Body,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    logger: Any,
    news: News,
) -> tuple[bool, datetime | None]:
    """Step the run until it ends (True, and when) or the daemon stops (False). A step is
    due when its delay has passed or the run has news (``News``), at most every
    STEP_GAP_SECONDS."""
    execution: Execution | None = None
    backoff, last = 1.0, 0.0
    try:
        while not stopped:
            news.clear()
            last = loop_time()
            snapshot = copy.deepcopy(dict(body))
            try:
                if execution is None:
                    execution = await memo.run_threads.call(
                        None, Execution.load, snapshot, memo.config
                    )
                    execution.wake = news.wake
                delay = await memo.run_threads.call(execution, execution.step, snapshot)
                backoff = 1.0
            except LogUnreadableError as exc:
                logger.warning(f"run log unreadable, retrying in {backoff:.0f}s: {exc}")
                kopf.event(body, type=exc.notice.type, reason=exc.notice.reason, message=str(exc))
                _forget(execution)
                execution = None
                delay, backoff = backoff, min(backoff * 2, MAX_BACKOFF_SECONDS)
            except Exception as exc:
                logger.warning(f"run step failed, retrying in {backoff:.0f}s: {_describe(exc)}")
                if execution is not None:
                    _post(body, execution)
                _forget(execution)
                execution = None
                delay, backoff = backoff, min(backoff * 2, MAX_BACKOFF_SECONDS)
            if execution is not None:
                _post(body, execution)
            if delay is None:
                return True, execution.status.completed_at if execution is not None else None
            if delay > 0:
                await news.wait(stopped, delay, execution.appended_at if execution else 0.0)
                gap = STEP_GAP_SECONDS - (loop_time() - last)
                if gap > 0 and not stopped:
                    await stopped.wait(gap)
        return False, None
    finally:
        _forget(execution)


class News:
    """What makes a running run's step due before its delay: its stream said something, it
    changed (cancelled, a person's answer), the gateway told of it. All of it is urgent but
    journal bytes alone: those wait until WRITE_GAP_SECONDS after the step that last appended
    journal events, so that a run printing steadily writes its log about once a second,
    while a line after a quiet spell is written at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._any, self._urgent = loop, asyncio.Event(), asyncio.Event()

    def wake(self, urgent: bool = True) -> None:
        """From any thread."""
        self._loop.call_soon_threadsafe(self._set, urgent)

    def _set(self, urgent: bool) -> None:
        self._any.set()
        if urgent:
            self._urgent.set()

    def clear(self) -> None:
        self._any.clear()
        self._urgent.clear()

    async def wait(self, stopped: kopf.DaemonStopped, delay: float, appended_at: float) -> None:
        await _until(stopped, self._any, delay)
        hold = WRITE_GAP_SECONDS - (time.monotonic() - appended_at)
        if self._any.is_set() and not self._urgent.is_set() and hold > 0 and not stopped:
            await _until(stopped, self._urgent, hold)


def loop_time() -> float:
    return asyncio.get_running_loop().time()


def _forget(execution: Execution | None) -> None:
    """Close what an execution holds open (its stream): it is made again from durable state."""
    if execution is not None:
        execution.close()


async def _until(stopped: kopf.DaemonStopped, news: asyncio.Event, delay: float) -> None:
    """Wait ``delay`` seconds, or until the run has news, or until the daemon stops."""

    async def stop() -> None:
        await stopped.wait(delay)

    waits = [asyncio.ensure_future(stop()), asyncio.ensure_future(news.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


def wake_run(uid: str) -> None:
    """Step the run at once (it changed, or the gateway told of it)."""
    wake = WAKERS.get(uid)
    if wake is not None:
        wake(True)


async def _keep(
    body: kopf.Body,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    logger: Any,
    completed_at: datetime | None = None,
) -> None:
    """Keep the finished run until its time to live has passed, then delete it."""
    default = memo.config.run_ttl_limit
    while not stopped:
        try:
            wait = await asyncio.to_thread(lifetime.expire, dict(body), default, completed_at)
        except Exception as exc:  # said where a person looks, and retried
            said = (
                f"The run's time to live has passed, but deleting it failed ({_describe(exc)}); "
                f"retrying in {MAX_BACKOFF_SECONDS:.0f}s."
            )
            logger.warning(said)
            notice = Notice(RunReason.EXPIRY_REFUSED, said)
            kopf.event(body, type=notice.type, reason=notice.reason, message=notice.message)
            wait = MAX_BACKOFF_SECONDS
        if wait is None:
            return
        await stopped.wait(wait)


@kopf.on.event(GROUP, VERSION, "agentruns")
async def run_seen(type: str | None, body: kopf.Body, **_: Any) -> None:
    """Filed (the runs' queues, metrics) on kopf's event loop; a finished run whose spec
    changed since is written to on a thread."""
    if type is not None:
        inputs.seen(type, dict(body))
        metrics.run_seen(type, dict(body), TERMINAL_PHASES)
    meta = body.get("metadata") or {}
    asked = (meta.get("generation"), str(meta.get("annotations") or {}))
    if type == "MODIFIED" and ASKED.get(str(meta.get("uid"))) != asked:
        wake_run(str(meta.get("uid")))  # cancelled, or a person's answer: at once
    ASKED[str(meta.get("uid"))] = asked
    if type == "DELETED":
        ASKED.pop(str(meta.get("uid")), None)
    if type == "MODIFIED" and lifetime.behind(dict(body)):
        await asyncio.to_thread(lifetime.observe_ended, dict(body))


@kopf.on.event("v1", "events")
async def gateway_said(type: str | None, body: kopf.Body, **_: Any) -> None:
    """What the egress gateway tells of a run: a host it asks about, what the run used at its
    model route (the only Events watched: the gateway's, by a server-side field selector set
    at start-up)."""
    host_asks.ASKS.seen(type, dict(body))
    spending.METERED.seen(type, dict(body))
    wake_run(str((body.get("involvedObject") or {}).get("uid")))


@kopf.on.delete(GROUP, VERSION, "agentruns")
def run_deleted(
    body: kopf.Body, status: kopf.Status, meta: kopf.Meta, memo: kopf.Memo, logger: Any, **_: Any
) -> None:
    """Kill a running harness's process group; its sandbox, if the run made it, and its
    ConfigMap log are garbage-collected with the run; its model route, if the gateway holds
    its key, and its log objects in a bucket are deleted here (a failure is raised: kopf
    retries, and the run stays until they are gone)."""
    pod = status.get("sandboxName")
    if status.get("phase") not in TERMINAL_PHASES and status.get("startedAt") and pod:
        try:
            in_pod.kill(meta["namespace"] or "", meta["uid"] or "", pod)
        except Exception as exc:
            logger.warning(f"could not stop the run's processes: {_describe(exc)}")
    host_asks.ASKS.forget(meta["uid"] or "")
    spending.METERED.forget(meta["uid"] or "")
    gateway = model_access.model_gateway(memo.config.gateway)
    if (body.get("spec") or {}).get("modelKey"):
        model_access.revoke(meta["uid"] or "", gateway)
    credential_access.revoke(meta["uid"] or "", gateway, credential_access.routed(dict(status)))
    try:
        deleted = logstore.delete_log(dict(body), memo.config)
    except logstore.LogStoreNotConfiguredError as exc:  # nothing to retry: say what is left
        where = (status.get("log") or {}).get("location")
        logger.warning(f"the run's log objects are left in {where}: {exc}")
        return
    if deleted:
        logger.info(f"deleted the run's {deleted} log objects")


def _post(body: kopf.Body, execution: Execution) -> None:
    """Post the Events the execution has to tell."""
    for notice in execution.notices:
        kopf.event(body, type=notice.type, reason=notice.reason, message=notice.message)
    execution.notices.clear()


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"
