"""A run's processes end with it: the scripts' ``paddock_end_processes``, run by a real bash in a
real process namespace whose first process is the sandbox container's keep-alive (as on the
real node), with processes entering it as an exec session's do (``nsenter``: their parent is
outside)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock.render.containers import KEEP_ALIVE
from paddock.render.sandbox_shell import END_PROCESSES
from support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)

# Each way a process outlives the exec that started it, and one that forks as fast as it can.
AGENT = r"""
exec > /dev/null 2>&1 < /dev/null
sleep 1001 & disown
(setsid sleep 1002 &)
nohup sleep 1003 > /dev/null 2>&1 &
setsid bash -c '(sleep 1005 &); exec sleep 1004' &
setsid bash -c 'for i in $(seq 1000); do sleep 1006 & done; sleep 1007' &
"""


@pytest.fixture
def container() -> Iterator[int]:
    """The host pid of the first process of a process namespace of its own."""
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", *KEEP_ALIVE])
    children = Path(f"/proc/{outer.pid}/task/{outer.pid}/children")
    first = wait_for(lambda: children.read_text().split(), 10, what="the namespace's pid 1")
    yield int(first[0])
    outer.kill()
    subprocess.run(["kill", "-KILL", first[0]], check=False)
    outer.wait(10)


def _exec(first: int, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` as an exec session would run it in the container."""
    argv = ["nsenter", "-t", str(first), "-p", "-m", "bash", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _commands(first: int) -> list[str]:
    listing = _exec(first, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done")
    return [line.strip() for line in listing.stdout.splitlines() if line.strip()]


def test_every_process_the_run_left_ends_and_an_exec_sessions_and_the_first_stay(
    container: int,
) -> None:
    person = subprocess.Popen(["nsenter", "-t", str(container), "-p", "-m", "sleep", "1999"])
    try:
        assert _exec(container, AGENT).returncode == 0
        wait_for(lambda: "sleep 1007" in _commands(container), 60, what="the agent's processes")
        ended = _exec(container, END_PROCESSES + "paddock_end_processes")
        assert ended.returncode == 0, ended.stderr
        left = _commands(container)
        assert [c for c in left if c.startswith("sleep 10")] == [], left
        assert "sleep 1999" in left  # the exec session's
        assert left.count(" ".join(KEEP_ALIVE)) == 1  # the first process
    finally:
        person.kill()
        person.wait(10)


def test_where_the_container_has_no_process_namespace_of_its_own_nothing_is_ended() -> None:
    """kwok's pods run on the host's: its pid 1 is not the keep-alive, and nothing is ended."""
    child = subprocess.Popen(["setsid", "sleep", "1998"])
    try:
        done = subprocess.run(["bash", "-c", END_PROCESSES + "paddock_end_processes"],
                              timeout=30, check=False)  # fmt: skip
        assert done.returncode == 0
        assert child.poll() is None
    finally:
        child.kill()
        child.wait(10)
