"""Operator settings from the environment, and the metrics' bookkeeping (pure parts)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Gauge
from pydantic import ValidationError

from paddock.metrics import PhaseTracker
from paddock.settings import OperatorSettings


def test_settings_come_from_paddock_env_vars() -> None:
    settings = OperatorSettings.from_env(
        {"PADDOCK_METRICS_PORT": "9000", "PADDOCK_RESYNC_SECONDS": "5", "HOME": "/root"}
    )
    assert settings.metrics_port == 9000
    assert settings.resync_seconds == 5
    assert settings.log_backend == "configmap"


@pytest.mark.parametrize(
    ("name", "value"),
    [("LOG_BACKEND", "s3"), ("METRICS_PORT", "70000"), ("WORKER_LIMIT", "0")],
)
def test_settings_refuse_what_they_cannot_honour(name: str, value: str) -> None:
    with pytest.raises(ValidationError):
        OperatorSettings.from_env({f"PADDOCK_{name}": value})


def test_phase_tracker_moves_one_object_between_phases_and_out() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("things", "Things by phase.", ["phase"], registry=registry)
    tracker = PhaseTracker(gauge, ("phase",))

    def count(phase: str) -> float:
        return registry.get_sample_value("things", {"phase": phase}) or 0.0

    assert tracker.update("a", ("Pending",)) is None
    tracker.update("b", ("Pending",))
    assert tracker.update("a", ("Ready",)) == ("Pending",)
    assert (count("Pending"), count("Ready")) == (1, 1)
    tracker.update("a", ("Ready",))  # the same phase again: no double count
    assert count("Ready") == 1
    tracker.update("a", None)  # deleted
    assert (count("Pending"), count("Ready")) == (1, 0)
