"""A run's events for a person or a tool: one line of text, or one JSON object, each."""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]


def as_text(event: Obj) -> str:
    """One line for a person: seq, time of day, type and summary."""
    clock = str(event.get("time", ""))[11:23]
    return f"{event['seq']:>5} {clock}  {event['type']:<14} {event.get('summary', '')}"


def as_json(event: Obj) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))
