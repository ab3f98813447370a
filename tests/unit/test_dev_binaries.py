"""What ``paddock dev`` builds before the operator starts: without the real node, only the
control plane's binaries (the build script told so by ``PADDOCK_REAL_NODE=0``); the real node's
count as built only with every one of their completion markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddock_dev import binaries

KEYS = (
    "K8S_BIN", "ETCD_BIN", "KWOK_BIN", "SNAPSHOT_CRDS", "SNAPSHOT_CONTROLLER_BIN",
    "KUBELET_BIN", "LOCAL_PATH_BIN", "NETWORK_POLICIES_BIN", "CSI_NODE_BIN", "VERSITYGW_BIN",
    "GITEA_BIN", "FLUX_BIN",
)  # fmt: skip


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A build script that records PADDOCK_REAL_NODE and prints a directory per part."""
    fake = tmp_path / "k8s-binaries.sh"
    lines = [f'echo "{key}={tmp_path}/{key.lower()}"' for key in KEYS]
    record = (
        f'echo "${{PADDOCK_REAL_NODE:-unset}}" > {tmp_path}/real-node\n'
        f'echo "${{PADDOCK_FORGE:-unset}}" > {tmp_path}/forge\n'
        f'echo "${{PADDOCK_FLUX:-unset}}" > {tmp_path}/flux'
    )
    fake.write_text("#!/bin/sh\n" + record + "\n" + "\n".join(lines) + "\n")
    fake.chmod(0o755)
    monkeypatch.setattr(binaries, "BUILD_SCRIPT", fake)
    monkeypatch.delenv("PADDOCK_REAL_NODE", raising=False)
    monkeypatch.delenv("PADDOCK_FORGE", raising=False)
    monkeypatch.delenv("PADDOCK_FLUX", raising=False)
    return tmp_path


def test_without_the_real_node_the_script_is_told_to_skip_it(script: Path) -> None:
    binaries.ensure_binaries(real_node=False)
    assert (script / "real-node").read_text() == "0\n"
    binaries.ensure_binaries()
    assert (script / "real-node").read_text() == "unset\n"


def test_the_forge_and_flux_are_built_only_when_asked_for(script: Path) -> None:
    binaries.ensure_binaries()
    assert (script / "forge").read_text() == "unset\n"  # what `paddock dev` asks: no forge
    binaries.ensure_binaries(forge=True)
    assert (script / "forge").read_text() == "1\n"
    assert (script / "flux").read_text() == "unset\n"
    binaries.ensure_binaries(flux=True)
    assert (script / "flux").read_text() == "1\n"
