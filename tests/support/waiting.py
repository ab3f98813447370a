"""Waiting on a condition, never on the clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, *, what: str = "") -> T:
    """Return the first truthy result of ``predicate``; fail after ``timeout`` seconds.

    Exceptions from the predicate count as "not yet" until the deadline, when the last one is
    chained to the TimeoutError so a failure says what was actually wrong.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            description = what or getattr(predicate, "__name__", "condition")
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {description}") from (
                last_error
            )
        time.sleep(0.05)
