"""The real node's plan and configuration: what it is named, what it may touch, and when the
local cluster falls back to kwok alone (and says why)."""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path

import pytest

from paddock_dev import cluster as local
from paddock_dev import node
from paddock_dev.processes import ClusterError, ClusterState


def test_turned_off_means_kwok_only_with_the_reason_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PADDOCK_REAL_NODE", "0")
    assert node.unavailable_reason() == "it is turned off (PADDOCK_REAL_NODE=0)"
    assert local._real_node_wanted(None) is False
    said = capsys.readouterr().err
    assert "no real node (it is turned off (PADDOCK_REAL_NODE=0)); kwok only" in said
    assert "init containers do not run" in said


def test_a_required_node_that_cannot_run_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADDOCK_REAL_NODE", "off")
    with pytest.raises(ClusterError, match="a real node was asked for, but cannot run here"):
        local._real_node_wanted(True)


def test_never_asked_for_is_never_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADDOCK_REAL_NODE", "1")
    assert local._real_node_wanted(False) is False


def test_each_state_directory_gets_its_own_host_names(tmp_path: Path) -> None:
    one = node.plan(ClusterState(tmp_path / "one"))
    two = node.plan(ClusterState(tmp_path / "two"))
    for key in ("bridge", "cgroup", "run_dir", "socket"):
        assert getattr(one, key) != getattr(two, key), key
    assert len(one.bridge) <= 15  # the kernel's limit on interface names
    assert len(str(one.socket)) < 108  # and on unix socket paths
    subnet = ipaddress.ip_network(one.subnet)
    assert subnet.subnet_of(node.SUBNET_BASE)
    assert not subnet.overlaps(ipaddress.ip_network(local.POD_CIDR, strict=False))
    assert not subnet.overlaps(ipaddress.ip_network(local.SERVICE_CIDR))
    assert node.plan(ClusterState(tmp_path / "one")) == one  # stable for its directory
    assert node.NodePlan.from_state(one.to_state()) == one  # and recorded whole


def test_kubelet_admits_only_the_clusters_certificates(tmp_path: Path) -> None:
    state = ClusterState(tmp_path, ports={"kubelet": 1, "kubelet-healthz": 2, "apiserver": 3})
    plan = dataclasses.replace(node.plan(state), host_ip="192.0.2.2")
    config = node._kubelet_config(state, plan)
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authentication"]["x509"]["clientCAFile"] == str(state.pki.ca_cert)
    assert config["address"] == "192.0.2.2"  # not every interface
    assert config["readOnlyPort"] == 0
    assert config["cgroupRoot"] == f"/{plan.cgroup}"
    assert config["imageGCHighThresholdPercent"] == 100  # imported images are never collected
