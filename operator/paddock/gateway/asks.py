"""Asking a person about a host: each host a run's policy asks about is posted once per run,
as a ``HostApprovalNeeded`` Event on the run (``render.host_asks``), from a thread of its own so
that Squid's answer never waits on the API server. Later connections to the host are refused
as the first was until the run's approvals say otherwise, and post nothing more."""

from __future__ import annotations

import queue
import sys
import threading

from paddock.gateway.directory import Ask
from paddock.kube import client as kube
from paddock.kube.errors import KubeError
from paddock.render.host_asks import host_ask_event
from paddock.times import utcnow

MAX_REMEMBERED = 10_000


class Asker:
    def __init__(self) -> None:
        self._asked: set[tuple[str, str]] = set()  # (run uid, HOST:PORT)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Ask] = queue.SimpleQueue()
        threading.Thread(target=self._post_all, daemon=True, name="asks").start()

    def __call__(self, ask: Ask) -> None:
        with self._lock:
            if (ask.uid, ask.target) in self._asked:
                return
            if len(self._asked) >= MAX_REMEMBERED:
                self._asked.clear()
            self._asked.add((ask.uid, ask.target))
        self._queue.put(ask)

    def _post_all(self) -> None:
        while True:
            ask = self._queue.get()
            event = host_ask_event(ask.namespace, ask.run, ask.uid, ask.target, utcnow())
            try:
                kube.create(event)
            except KubeError as exc:  # asked again at the next connection
                with self._lock:
                    self._asked.discard((ask.uid, ask.target))
                print(f"paddock gateway: asking about {ask.target}: {exc}", file=sys.stderr)
