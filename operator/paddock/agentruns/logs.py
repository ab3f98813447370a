"""Reading a run's log back: replay from a seq and, on request, follow until the run ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from paddock.kube import client as kube
from paddock.runs.events import TERMINAL_TYPES
from paddock.runs.log import read_log

Obj = dict[str, Any]
FOLLOW_POLL_SECONDS = 0.5


class RunNotFoundError(LookupError):
    pass


def events(
    namespace: str,
    name: str,
    from_seq: int = 0,
    *,
    follow: bool = False,
    poll_seconds: float = FOLLOW_POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Obj]:
    """Each event from ``from_seq`` on, once, in order. With ``follow``, keep reading until
    a terminal event has been given (or the run is deleted)."""
    next_seq = from_seq
    while True:
        run = kube.get("AgentRun", namespace, name)
        if run is None:
            raise RunNotFoundError(f"AgentRun {name} not found in namespace {namespace}")
        ended = False
        for event in read_log(kube, namespace, run["metadata"]["uid"]):
            ended = ended or event["type"] in TERMINAL_TYPES
            if event["seq"] >= next_seq:
                next_seq = event["seq"] + 1
                yield event
        if not follow or ended:
            return
        sleep(poll_seconds)
