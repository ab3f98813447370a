"""A git repository served over git:// by ``git daemon`` on this host, for sandboxes on the real
node to clone (shallow clones need a smart protocol; the daemon is the smallest one)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.ports import free_port
from support.waiting import wait_for


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repository(
    base: Path, name: str, history: list[dict[str, str]], branch: str = "main"
) -> Path:
    """A bare repository ``<base>/<name>.git`` whose ``branch`` has one commit per entry of
    ``history``, each writing its files."""
    work = base / f"{name}-work"
    work.mkdir(parents=True)
    _git("init", "-q", "-b", branch, cwd=work)
    identity = ["-c", "user.name=Paddock Tests", "-c", "user.email=tests@paddock.invalid"]
    for number, files in enumerate(history, start=1):
        for path, content in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(content)
        _git("add", ".", cwd=work)
        _git(*identity, "commit", "-q", "-m", f"commit {number}", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(base / f"{name}.git"), cwd=base)
    return base / f"{name}.git"


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def serve(base: Path, host: str) -> Iterator[str]:
    """Serve every repository under ``base``; yields the URL prefix (``git://host:port``)."""
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git", "daemon", "--reuseaddr", "--export-all", f"--base-path={base}",
            f"--port={port}", "--listen=0.0.0.0", str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: _listening(host, port), 30, what="git daemon listening")
        yield f"git://{host}:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
