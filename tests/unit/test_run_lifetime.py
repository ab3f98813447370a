"""How long a finished run is kept: its spec's ttlSecondsAfterFinished, else the operator's
default, counted from when it finished."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paddock.agentruns.lifetime import expires_at
from paddock.api.agentrun import AgentRunSpec
from paddock.settings import OperatorSettings

FINISHED = datetime(2026, 1, 1, tzinfo=UTC)


def spec(**fields: Any) -> AgentRunSpec:
    base = {"sandboxRef": {"name": "box"}, "harness": "command", "command": "true"}
    return AgentRunSpec.model_validate(base | fields)


@pytest.mark.parametrize(
    ("fields", "default", "kept_for"),
    [
        ({}, 604800, timedelta(days=7)),
        ({"ttlSecondsAfterFinished": 30}, 604800, timedelta(seconds=30)),
        ({"ttlSecondsAfterFinished": 0}, None, timedelta(0)),
        ({}, None, None),
    ],
)
def test_a_finished_run_is_kept_for_its_own_ttl_else_the_operators(
    fields: dict[str, Any], default: int | None, kept_for: timedelta | None
) -> None:
    at = expires_at(spec(**fields), FINISHED, default)
    assert at == (None if kept_for is None else FINISHED + kept_for)


def test_a_run_not_finished_is_kept() -> None:
    assert expires_at(spec(ttlSecondsAfterFinished=1), None, 604800) is None


def test_the_schema_refuses_a_negative_ttl() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        spec(ttlSecondsAfterFinished=-1)


def test_the_operators_never_is_no_time_to_live() -> None:
    never = OperatorSettings.from_env({"PADDOCK_RUN_TTL_SECONDS_AFTER_FINISHED": "never"})
    assert never.run_ttl_limit is None
    assert OperatorSettings.from_env({}).run_ttl_limit == 604800
