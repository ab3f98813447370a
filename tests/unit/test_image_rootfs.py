"""Building the local cluster's images: what debootstrap leaves mounted in a rootfs is
unmounted before the rootfs is packed or removed (real mounts: the tests run as root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from paddock_dev.images import _tar_rootfs, _unmount_under


def _mounted_under(path: Path) -> list[str]:
    prefix = f"{path.resolve()}/"
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [m for m in (line.split()[4] for line in lines) if f"{m}/".startswith(prefix)]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a filesystem needs root")
def test_what_is_left_mounted_in_a_rootfs_is_unmounted_and_never_packed(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "proc").mkdir(parents=True)
    (rootfs / "etc").mkdir()
    (rootfs / "etc" / "hostname").write_text("image\n")
    subprocess.run(["mount", "-t", "tmpfs", "leftover", str(rootfs / "proc")], check=True)
    (rootfs / "proc" / "inner").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "deeper", str(rootfs / "proc" / "inner")], check=True)
    (rootfs / "proc" / "inner" / "host-file").write_text("not the image's\n")
    try:
        _tar_rootfs(rootfs, tmp_path / "layer.tar")  # even mounted: not packed
        listed = subprocess.run(["tar", "-tf", str(tmp_path / "layer.tar")], check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        assert "./etc/hostname" in listed.splitlines()
        assert "host-file" not in listed
        _unmount_under(rootfs)
        assert _mounted_under(rootfs) == []
    finally:
        for mount in sorted(_mounted_under(rootfs), key=len, reverse=True):
            subprocess.run(["umount", "--lazy", mount], check=False)
