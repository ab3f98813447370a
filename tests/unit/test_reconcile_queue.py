"""The reconcile queue: events of one key within its delay are one reconcile; an event during
a reconcile is followed by another; a reconcile that waits is run again when it said."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from paddock.handlers.coalescing import ReconcileQueue

TIMEOUT = 10.0


class Recorder:
    def __init__(self, again: Callable[[str, int], float | None] | None = None) -> None:
        self.runs: list[str] = []
        self.attempts: list[int] = []
        self.again = again
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self._changed = threading.Condition()

    def __call__(self, key: str, attempt: int = 0) -> float | None:
        self.attempts.append(attempt)
        self.started.set()
        self.gate.wait(TIMEOUT)
        with self._changed:
            self.runs.append(key)
            self._changed.notify_all()
        return self.again(key, self.runs.count(key)) if self.again else None

    def wait_for(self, count: int) -> list[str]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.runs) >= count, TIMEOUT), self.runs
            return list(self.runs)


@pytest.fixture
def queues() -> Iterator[list[ReconcileQueue[str]]]:
    made: list[ReconcileQueue[str]] = []
    yield made
    for queue in made:
        queue.stop()


def test_events_of_one_key_within_the_delay_are_one_reconcile(
    queues: list[ReconcileQueue[str]],
) -> None:
    recorder = Recorder()
    queue = ReconcileQueue(recorder, delay=0.3, workers=4)
    queues.append(queue)
    for _ in range(20):
        queue.ask("a")
    queue.ask("b")
    assert sorted(recorder.wait_for(2)) == ["a", "b"]
    with queue._changed:  # nothing else is due: the 19 repeats were dropped, not queued
        assert queue._due == []
    assert queue.waiting() == 0


def test_an_event_during_a_reconcile_is_followed_by_another(
    queues: list[ReconcileQueue[str]],
) -> None:
    recorder = Recorder()
    recorder.gate.clear()
    queue = ReconcileQueue(recorder, delay=0, workers=2)
    queues.append(queue)
    queue.ask("a")
    assert recorder.started.wait(TIMEOUT)
    queue.ask("a")  # while the first runs: what it read may be older than this event
    recorder.gate.set()
    assert recorder.wait_for(2) == ["a", "a"]


def test_one_reconcile_of_a_key_runs_at_a_time_however_many_workers_are_free(
    queues: list[ReconcileQueue[str]],
) -> None:
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    lock = threading.Lock()
    release = threading.Event()

    def action(key: str, attempt: int) -> float | None:
        with lock:
            running[key] = running.get(key, 0) + 1
            most[key] = max(most.get(key, 0), running[key])
        release.wait(TIMEOUT)
        with lock:
            running[key] -= 1
        return recorder(key, attempt)

    recorder = Recorder()
    queue = ReconcileQueue(action, delay=0, workers=4)
    queues.append(queue)
    queue.ask("a")
    wait_for_running(queue, "a")
    for _ in range(3):  # due at once, with three workers free: held until the first is done
        queue.ask("a")
    queue.ask("b")  # another key is not held up
    deadline = time.monotonic() + TIMEOUT
    while most.get("b") is None:
        assert time.monotonic() < deadline, "b never ran beside a"
        time.sleep(0.01)
    assert queue.waiting() == 1  # "a", due, held back: still counted as waiting
    release.set()
    assert sorted(recorder.wait_for(3)) == ["a", "a", "b"]  # the three asks are one reconcile
    assert most == {"a": 1, "b": 1}


def wait_for_running(queue: ReconcileQueue[str], key: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        with queue._changed:
            if key in queue._running:
                return
        assert time.monotonic() < deadline, f"{key} never started"
        time.sleep(0.01)


def test_a_reconcile_that_waits_runs_again_after_the_time_it_gave(
    queues: list[ReconcileQueue[str]],
) -> None:
    recorder = Recorder(again=lambda _, runs: 0.2 if runs < 3 else None)
    queue = ReconcileQueue(recorder, delay=0, workers=1)
    queues.append(queue)
    start = time.monotonic()
    queue.ask("a")
    assert recorder.wait_for(3) == ["a", "a", "a"]
    assert time.monotonic() - start >= 0.4  # two waits of 0.2 s
    assert recorder.attempts == [0, 1, 2]  # told how many times in a row it has waited
    assert queue.waiting() == 0


def test_an_event_brings_forward_a_reconcile_that_waits_long(
    queues: list[ReconcileQueue[str]],
) -> None:
    recorder = Recorder(again=lambda _, runs: 3600.0 if runs == 1 else None)
    queue = ReconcileQueue(recorder, delay=0, workers=1)
    queues.append(queue)
    queue.ask("a")
    recorder.wait_for(1)
    wait_for_waiting(queue)  # queued again, for an hour from now
    start = time.monotonic()
    queue.ask("a")  # a change: looked at now, not in an hour
    assert recorder.wait_for(2) == ["a", "a"]
    assert time.monotonic() - start < TIMEOUT
    assert queue.waiting() == 0  # the hour's entry is dropped when it comes up


def wait_for_waiting(queue: ReconcileQueue[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while queue.waiting() == 0:
        assert time.monotonic() < deadline, "never queued again"
        time.sleep(0.01)


def test_a_failing_reconcile_is_tried_again_and_does_not_stop_the_queue(
    queues: list[ReconcileQueue[str]],
) -> None:
    failures = []

    def action(key: str, attempt: int) -> float | None:
        if key == "bad" and attempt == 0:
            failures.append(attempt)
            raise RuntimeError("a bug")
        return recorder(key, attempt)

    recorder = Recorder()
    queue = ReconcileQueue(action, delay=0, workers=1)
    queues.append(queue)
    queue.ask("bad")
    queue.ask("good")
    assert sorted(recorder.wait_for(2)) == ["bad", "good"]  # "bad" again after 1 s
    assert failures == [0]
    assert recorder.attempts[recorder.runs.index("bad")] == 1


def test_a_reconcile_tried_again_runs_in_the_context_of_the_handler_that_asked(
    queues: list[ReconcileQueue[str]],
) -> None:
    # kopf.event reads kopf's settings from a context variable that only its handlers have.
    settings: contextvars.ContextVar[str] = contextvars.ContextVar("settings")
    seen: list[str | None] = []

    def action(key: str, attempt: int) -> float | None:
        seen.append(settings.get(None))
        if attempt == 0:
            return 0.05  # waits once
        return recorder(key, attempt)

    recorder = Recorder()
    queue = ReconcileQueue(action, delay=0, workers=1)
    queues.append(queue)
    contextvars.copy_context().run(lambda: (settings.set("kopf's"), queue.ask("a")))
    recorder.wait_for(1)
    assert seen == ["kopf's", "kopf's"]


def test_a_stopped_queue_takes_nothing_more() -> None:
    recorder = Recorder()
    queue = ReconcileQueue(recorder, delay=60, workers=2)
    queue.ask("a")
    queue.stop()
    queue.ask("b")
    assert queue.waiting() == 0
    assert recorder.runs == []
