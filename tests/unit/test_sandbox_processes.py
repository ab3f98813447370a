"""A run's processes end with it: the scripts' ``paddock_end_processes``, run by a real bash in a
real process namespace whose first process is the sandbox container's keep-alive (as on the
real node), as the sandbox's user (uid 1000), with processes entering it as an exec session's
do (``nsenter``: their parent is outside)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock.render.containers import KEEP_ALIVE
from paddock.render.sandbox import SANDBOX_UID
from paddock.render.sandbox_shell import END_PROCESSES
from support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(map(shutil.which, ("unshare", "nsenter", "setpriv", "gcc"))),
    reason="needs root, unshare, nsenter, setpriv and gcc",
)

AS_SANDBOX_USER = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
# Each way a process outlives the exec that started it, and one that forks as fast as it can.
AGENT = r"""
exec > /dev/null 2>&1 < /dev/null
sleep 1001 & disown
(setsid sleep 1002 &)
nohup sleep 1003 > /dev/null 2>&1 &
setsid bash -c '(sleep 1005 &); exec sleep 1004' &
setsid bash -c 'for i in $(seq 1000); do sleep 1006 & done; sleep 1007' &
setsid "$1" &
"""
# A process whose first thread has ended (a zombie, to /proc/PID/stat) while another runs on,
# and starts a child.
THREADED = r"""
#include <pthread.h>
#include <unistd.h>
static void *other(void *unused) {
    if (fork() == 0) execlp("sleep", "sleep", "1008", (char *)0);
    for (;;) pause();
    return unused;
}
int main(void) {
    pthread_t thread;
    pthread_create(&thread, 0, other, 0);
    sleep(1);
    pthread_exit(0);
}
"""


@pytest.fixture
def container() -> Iterator[int]:
    """The host pid of the first process (the keep-alive, as the sandbox's user) of a process
    namespace of its own."""
    argv = ["unshare", "--pid", "--fork", "--mount-proc", *AS_SANDBOX_USER, *KEEP_ALIVE]
    outer = subprocess.Popen(argv)
    children = Path(f"/proc/{outer.pid}/task/{outer.pid}/children")
    first = wait_for(lambda: children.read_text().split(), 10, what="the namespace's pid 1")
    yield int(first[0])
    outer.kill()
    subprocess.run(["kill", "-KILL", first[0]], check=False)
    outer.wait(10)


def _exec(first: int, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` as an exec session would run it in the container, as the sandbox's user."""
    argv = ["nsenter", "-t", str(first), "-p", "-m", *AS_SANDBOX_USER, "bash", "-c", script]
    return subprocess.run([*argv, "exec", *args], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip


def _commands(first: int) -> list[str]:
    """Each process's command line; a process whose first thread has ended while others run
    (its command line reads empty) as ``threads N``."""
    lister = (
        "for d in /proc/[0-9]*; do t=($d/task/*); c=$(tr '\\0' ' ' < $d/cmdline); "
        'if [ ${#t[@]} -gt 1 ]; then echo "threads ${#t[@]} $c"; else echo "$c"; fi; done'
    )
    listing = _exec(first, lister)
    return [line.strip() for line in listing.stdout.splitlines() if line.strip()]


@pytest.fixture
def threaded() -> Iterator[Path]:
    """THREADED, built where the sandbox's user may run it."""
    directory = Path(tempfile.mkdtemp(prefix="paddock-threaded-"))
    directory.chmod(0o755)
    program = directory / "threaded"
    subprocess.run(["gcc", "-pthread", "-x", "c", "-o", str(program), "-"], input=THREADED,
                   text=True, check=True)  # fmt: skip
    yield program
    shutil.rmtree(directory)


def test_every_process_the_run_left_ends_and_an_exec_sessions_and_the_first_stay(
    container: int, threaded: Path
) -> None:
    person = subprocess.Popen(
        ["nsenter", "-t", str(container), "-p", "-m", *AS_SANDBOX_USER, "sleep", "1999"]
    )
    try:
        assert _exec(container, AGENT, str(threaded)).returncode == 0
        wait_for(lambda: {"sleep 1007", "sleep 1008", "threads 2"} <= set(_commands(container)),
                 60, what="the agent's processes")  # fmt: skip
        keep_alives_sleep = [c for c in _commands(container) if c == "sleep 3600"]
        ended = _exec(container, END_PROCESSES + "paddock_end_processes")
        assert ended.returncode == 0, ended.stderr
        left = _commands(container)
        assert [c for c in left if c.startswith(("sleep 10", "threads"))] == [], left
        assert "sleep 1999" in left  # the exec session's
        assert left.count(" ".join(KEEP_ALIVE)) == 1  # the first process
        assert [c for c in left if c == "sleep 3600"] == keep_alives_sleep == ["sleep 3600"]
    finally:
        person.kill()
        person.wait(10)


def test_a_container_whose_first_process_is_not_the_keep_alive_is_refused() -> None:
    argv = ["unshare", "--pid", "--fork", "--mount-proc", *AS_SANDBOX_USER, "bash", "-c",
            END_PROCESSES + "paddock_end_processes"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "not the sandbox's keep-alive" in done.stderr


def test_run_as_root_nothing_is_ended() -> None:
    """kwok's pods run as root in the host's process namespace; a sandbox never runs as root."""
    child = subprocess.Popen(["setsid", "sleep", "1998"])
    try:
        done = subprocess.run(["bash", "-c", END_PROCESSES + "paddock_end_processes"],
                              timeout=30, check=False)  # fmt: skip
        assert done.returncode == 0
        assert child.poll() is None
    finally:
        child.kill()
        child.wait(10)
