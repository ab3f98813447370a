"""Reconciles that watch events ask for, gathered per object.

A sandbox coming up sends a burst of watch events (its PVC bound; its pod scheduled, each init
container started and done, the pod running, Ready), and a Workspace or policy change reaches
every sandbox made from it. Reconciling once per event would decide, and often write, a status
for each intermediate state. Instead an event asks for a reconcile of its key; a key asked for
again while it waits is not queued twice; each runs ``delay`` seconds after it was first asked,
on one of a bounded number of worker threads. One reconcile of a key runs at a time (as in
controller-runtime's work queue): a key asked for while its reconcile runs is queued again,
and runs once that one is done, so the last event is always followed by a reconcile that
sees it, and two reconciles of one key never decide side by side in the queue. A reconcile
that waits for something (a refused write, a missing Workspace) says after how long to look
again, and is queued for then (0: at once, more to do, not a wait); one that fails (a bug) is
tried again after 1, 2, 4 ... up to 300 seconds. Each reconcile is told how many times in a
row its key has had to wait.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger("paddock.queue")
K = TypeVar("K", bound=Hashable)
MAX_BACKOFF = 300.0


class ReconcileQueue(Generic[K]):
    """A delaying, deduplicating queue of keys, drained by ``workers`` threads."""

    def __init__(
        self, action: Callable[[K, int], float | None], *, delay: float, workers: int
    ) -> None:
        self._action = action
        self._delay = delay
        # (when, order, key, the asker's context): a heap. A reconcile runs in the context of
        # the handler that asked for it (kopf's settings and event queue, which kopf.event
        # needs), as kopf's own executor runs its handlers.
        self._due: list[tuple[float, int, K, contextvars.Context]] = []
        self._waiting: dict[K, float] = {}  # when each queued key is due
        self._attempts: dict[K, int] = {}  # waits in a row, per key; only while it waits
        self._running: set[K] = set()
        self._after_running: dict[K, contextvars.Context] = {}  # due while its reconcile ran
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._work, name=f"paddock-reconcile-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def ask(self, key: K, after: float | None = None) -> None:
        """Reconcile ``key`` in ``after`` seconds (default: the queue's delay): once, however
        often it is asked before its turn; a key queued for later (a reconcile that waits) is
        brought forward."""
        self._push(key, self._delay if after is None else after, contextvars.copy_context())

    def _push(self, key: K, after: float, context: contextvars.Context) -> None:
        with self._changed:
            due = time.monotonic() + after
            if self._stopped or self._waiting.get(key, due + 1) <= due:
                return
            # An entry it replaces stays in the heap, and is skipped when it comes up.
            self._waiting[key] = due
            heapq.heappush(self._due, (due, next(self._order), key, context))
            self._changed.notify()

    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting.keys() | self._after_running.keys())

    def stop(self) -> None:
        """Let the running reconciles finish; drop the ones not started."""
        with self._changed:
            self._stopped = True
            self._due.clear()
            self._waiting.clear()
            self._attempts.clear()
            self._after_running.clear()
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()

    def _next(self) -> tuple[K, contextvars.Context] | None:
        with self._changed:
            while not self._stopped:
                now = time.monotonic()
                if self._due and self._due[0][0] <= now:
                    due, _, key, context = heapq.heappop(self._due)
                    if self._waiting.get(key) != due:
                        continue  # replaced by an earlier entry, which has run
                    del self._waiting[key]  # asked again from now on: queued again
                    if key in self._running:
                        self._after_running[key] = context  # once the running one is done
                        continue
                    self._running.add(key)
                    return key, context
                self._changed.wait(self._due[0][0] - now if self._due else None)
            return None

    def _work(self) -> None:
        while (due := self._next()) is not None:
            key, context = due
            with self._changed:
                attempt = self._attempts.pop(key, 0)
            again: float | None = None
            try:
                again = context.run(self._action, key, attempt)
            except Exception:  # a bug in one reconcile must not stop the others
                log.exception("reconcile of %s failed", key)
                again = min(2.0**attempt, MAX_BACKOFF)
            finally:
                with self._changed:
                    self._running.discard(key)
                    asked = self._after_running.pop(key, None)
                    if again:  # a wait; 0 is "more to do now" (a pool's next creates)
                        self._attempts[key] = attempt + 1
            if asked is not None:
                self._push(key, 0.0, asked)
            if again is not None:
                # In the context of the handler that asked: a worker thread has none of kopf's.
                self._push(key, again, context.copy())
