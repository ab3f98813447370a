"""The local cluster's state file, written by the tests' workers side by side: a worker that
restarts one component records only that component, so a state read before another worker
restarted another one never puts that one's old pid back."""

from __future__ import annotations

import json
from pathlib import Path

from paddock_dev.processes import ClusterState


def test_a_component_recorded_from_a_stale_state_leaves_the_others_as_they_are_now(
    tmp_path: Path,
) -> None:
    ClusterState(tmp_path, ports={"forge": 1000}, pids={"forge": 1, "gateway": 10},
                 commands={"forge": "gitea", "gateway": "paddock"}).save()  # fmt: skip
    stale = ClusterState.load(tmp_path)  # (a worker read it, then another restarted the forge)
    forge = ClusterState.load(tmp_path)
    assert stale is not None
    assert forge is not None
    forge.pids["forge"] = 2
    forge.record("forge")
    stale.pids["gateway"], stale.ports["gateway-metrics"] = 11, 2000
    stale.record("gateway", "gateway-metrics")
    written = json.loads((tmp_path / "state.json").read_text())
    assert written["pids"] == {"forge": 2, "gateway": 11}
    assert written["ports"] == {"forge": 1000, "gateway-metrics": 2000}
    assert stale.pids == {"forge": 2, "gateway": 11}  # (and the stale one is up to date)


def test_a_component_no_longer_held_is_removed_and_nothing_is_left_half_written(
    tmp_path: Path,
) -> None:
    state = ClusterState(tmp_path, pids={"forge": 1}, commands={"forge": "gitea"})
    state.save()
    del state.pids["forge"], state.commands["forge"]
    state.record("forge")
    assert json.loads((tmp_path / "state.json").read_text())["pids"] == {}
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
