"""A real-node sandbox image with an agent CLI in it: the sandbox image's layer plus the
CLI's binary at /usr/local/bin, built without Docker (the sandbox image's archive, a file
added to its one layer, a new archive) and imported into the local cluster's real node.
Cached by the base image and the binary."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

from paddock.devcluster import images, node
from paddock.devcluster.binaries import cache_dir
from paddock.devcluster.processes import ClusterState


def _layer_of(archive: Path, into: Path) -> Path:
    """The one layer of an image archive that ``images.write_oci_archive`` wrote."""
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest_digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{manifest_digest}"))  # type: ignore[arg-type]
        layer_digest = manifest["layers"][0]["digest"].split(":")[1]
        source = tar.extractfile(f"blobs/sha256/{layer_digest}")
        assert source is not None
        layer = into / "layer.tar"
        with layer.open("wb") as out:
            shutil.copyfileobj(source, out)
    return layer


def agent_image(name: str, binary: Path, state_dir: Path) -> str:
    """The sandbox image with ``binary`` as /usr/local/bin/``name``, imported into the real
    node of the cluster in ``state_dir``; its reference."""
    base = images.ensure_image("sandbox", images.RECIPES["sandbox"])
    key = hashlib.sha256(f"{base.archive}:{base.archive.stat().st_mtime_ns}".encode())
    key.update(binary.read_bytes())
    reference = f"localhost/paddock/sandbox-{name}:{key.hexdigest()[:12]}"
    directory = cache_dir() / "images" / f"sandbox-{name}" / key.hexdigest()[:16]
    archive = directory / "image.tar"
    if not archive.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        layer = _layer_of(base.archive, directory)
        with tarfile.open(layer, "a") as tar:
            info = tar.gettarinfo(str(binary), arcname=f"usr/local/bin/{name}")
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = 0o755
            with binary.open("rb") as handle:
                tar.addfile(info, handle)
        config = images.ImageConfig(
            user=f"{images.SANDBOX_UID}:{images.SANDBOX_UID}", working_dir="/workspace"
        )
        partial = directory / "image.tar.partial"
        images.write_oci_archive(layer, reference, config, partial)
        partial.rename(archive)
        layer.unlink()
    state = ClusterState.load(state_dir)
    plan = node.NodePlan.from_state(state.node) if state else None
    assert plan is not None, f"no local cluster with a real node in {state_dir}"
    node.import_images(plan, [images.Image(reference, archive)])
    return reference
