"""How long a finished run is kept: its spec's ttlSecondsAfterFinished, else the operator's
default, counted from when it finished."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest

from paddock.agentruns.lifetime import expires_at
from paddock.api.agentrun import AgentRunSpec

FINISHED = datetime(2026, 1, 1, tzinfo=UTC)


def spec(**fields: Any) -> AgentRunSpec:
    base = {"sandboxRef": {"name": "box"}, "harness": "command", "command": "true"}
    return AgentRunSpec.model_validate(base | fields)


@pytest.mark.parametrize(
    ("fields", "default", "kept_for"),
    [
        ({}, 604800, timedelta(days=7)),
        ({"ttlSecondsAfterFinished": 30}, 604800, timedelta(seconds=30)),
        ({"ttlSecondsAfterFinished": 0}, "never", timedelta(0)),
        ({}, "never", None),
    ],
)
def test_a_finished_run_is_kept_for_its_own_ttl_else_the_operators(
    fields: dict[str, Any], default: int | Literal["never"], kept_for: timedelta | None
) -> None:
    at = expires_at(spec(**fields), FINISHED, default)
    assert at == (None if kept_for is None else FINISHED + kept_for)


def test_a_run_not_finished_is_kept() -> None:
    assert expires_at(spec(ttlSecondsAfterFinished=1), None, 604800) is None


def test_the_schema_refuses_a_negative_ttl() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        spec(ttlSecondsAfterFinished=-1)
