"""Asking a person about a host: each host a run's policy asks about is posted once per run,
as a ``HostApprovalNeeded`` Event on the run (``render.host_asks``), from a thread of its own so
that Squid's answer never waits on the API server. Later connections to the host are refused
as the first was until the run's approvals say otherwise, and post nothing more."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable

from paddock.gateway.directory import Ask
from paddock.kube import client as kube
from paddock.kube.errors import KubeError
from paddock.render.host_asks import host_ask_event
from paddock.times import utcnow

MAX_REMEMBERED = 10_000
# Hosts asked about per run: an agent that tries host after host posts no more than this many
# Events (the operator records no more approvals either, gating.MAX_HOSTS_ASKED); the rest
# are refused without asking.
MAX_PER_RUN = 20


def post_event(ask: Ask) -> None:
    """The run's HostApprovalNeeded Event, created."""
    kube.create(host_ask_event(ask.namespace, ask.run, ask.uid, ask.target, utcnow()))


class Asker:
    """Asks once per run and host, at most ``MAX_PER_RUN`` hosts a run, through ``post``."""

    def __init__(self, post: Callable[[Ask], None] = post_event) -> None:
        self._post = post
        self._asked: set[tuple[str, str]] = set()  # (run uid, HOST:PORT)
        self._per_run: dict[str, int] = {}
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Ask] = queue.SimpleQueue()
        threading.Thread(target=self._post_all, daemon=True, name="asks").start()

    def __call__(self, ask: Ask) -> None:
        with self._lock:
            if (ask.uid, ask.target) in self._asked or self._per_run.get(ask.uid, 0) >= MAX_PER_RUN:
                return
            if len(self._asked) >= MAX_REMEMBERED:
                self._asked.clear()
                self._per_run.clear()
            self._asked.add((ask.uid, ask.target))
            self._per_run[ask.uid] = self._per_run.get(ask.uid, 0) + 1
        self._queue.put(ask)

    def _post_all(self) -> None:
        while True:
            ask = self._queue.get()
            try:
                self._post(ask)
            except KubeError as exc:  # asked again at the next connection
                with self._lock:
                    self._asked.discard((ask.uid, ask.target))
                    self._per_run[ask.uid] -= 1
                print(f"paddock gateway: asking about {ask.target}: {exc}", file=sys.stderr)
