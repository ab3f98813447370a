"""metav1.Condition lists: set one, keeping its transition time when its status is unchanged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool | None,
    reason: str,
    message: str = "",
    *,
    generation: int | None = None,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """A new list with the condition ``type_`` set; True/False/Unknown from True/False/None."""
    text = "Unknown" if status is None else ("True" if status else "False")
    previous = next((c for c in conditions if c.get("type") == type_), None)
    changed = previous is None or previous.get("status") != text
    condition: dict[str, Any] = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": (now or now_iso())
        if changed or previous is None
        else previous.get("lastTransitionTime", now or now_iso()),
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != type_] + [condition]


def get_condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def is_true(conditions: list[dict[str, Any]], type_: str) -> bool:
    condition = get_condition(conditions, type_)
    return condition is not None and condition.get("status") == "True"
