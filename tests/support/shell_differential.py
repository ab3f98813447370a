"""What a command really runs, under the real bash 5.2 and dash: the differential check of the
policy engine (tests/unit/test_policy_differential.py).

A ``Shells`` runs each command in a throwaway directory inside namespaces of its own (mount,
network, pid), as an unprivileged user with at most 256 processes, where the system's PATH
directories (``/usr/bin``, ``/usr/local/bin``, ...) hold only fakes, each recording its argv
(``FAKES``; any other name there is missing): so ``rm``, ``/bin/rm`` and ``command -p rm`` all
record and run nothing. Every mount is read-only but the command's own directories. A program
elsewhere (``/usr/lib/git-core/git``) runs for real, unrecorded, as that user. A few
fakes then run the real program (the shells themselves, ``env``, ``xargs``, ``timeout`` and the
like, which run other programs, and data tools such as ``cat`` whose output a command may run),
so what those run is recorded too. ``/dev`` holds only ``null``, ``zero``, ``urandom``, ``tty``
and the ``fd`` links; the network namespace has no interface but loopback, where the runner
listens on port 9 (TCP and UDP), so a ``/dev/tcp/127.0.0.1/9`` connection is seen even where
the command hides its errors (any other reaches nothing, and is seen in the shell's error).

``Ran`` is what one run did: each program's argv, each name a shell looked up on PATH and did
not find (a file of that name there would have run: the sandbox's PATH may hold directories
the agent writes), the files it wrote (in its directory and its HOME), whether it tried a
``/dev/tcp`` or ``/dev/udp`` connection, and how it ended. Needs root
(to make the namespaces) and ``unshare``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHELLS = ("bash", "dash")
# Programs that record, then run the real one: what they run is recorded too.
RUNNING = {"bash": "bash", "sh": "dash", "dash": "dash", "env": "env", "xargs": "xargs",
           "timeout": "timeout", "nohup": "nohup", "nice": "nice", "setsid": "setsid",
           "stdbuf": "stdbuf", "cat": "cat", "head": "head", "tr": "tr", "cut": "cut",
           "wc": "wc", "base64": "base64", "rev": "rev"}  # fmt: skip
# Every other name on PATH records and runs nothing.
FAKES = (
    "ls", "echo", "printf", "grep", "git", "rm", "curl", "wget", "nc", "python", "python3",
    "node", "make", "pnpm", "npm", "touch", "mkdir", "cp", "mv", "chmod", "sudo", "ssh", "sed",
    "awk", "perl", "ruby", "kill", "pkill", "find", "tail", "sort", "true", "false", "test",
    "sleep", "tee", "date", "id", "whoami", "watch", "faketime", "proxychains4", "flock",
    "pytest", "go", "cargo", "docker", "kubectl", "gcc", "uniq", "xxd", "od", "diff", "patch",
    "tar", "gzip", "unzip", "zip", "ln", "readlink", "realpath", "dirname", "basename", "yes",
    "seq", "expr", "jq", "ps", "su", "exec", "command", "builtin", "eval", "source", "time",
)  # fmt: skip
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
BIN_DIRECTORIES = ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/bin", "/sbin")
NOBODY = 65534
PORT = 9  # where the generated commands connect
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
RUN_SECONDS = 3.0
MAX_PROCESSES = 256
SEEDED = {"a.txt": "rm\n", "b.txt": "hello\n", "scripts/run.sh": "rm -rf x\n"}
# What bash and dash say of a name not found on PATH (bash: "bash: line 1: NAME: command not
# found"; dash: "dash: 1: NAME: not found"; either: "...: exec: NAME: not found").
NOT_FOUND = re.compile(r"^\S+: (?:line )?\d+: (?:exec: )?(.+?): (?:command )?not found$", re.M)


@dataclass(frozen=True)
class Ran:
    """What one command did in one shell."""

    programs: tuple[tuple[str, ...], ...]
    missing: tuple[str, ...]  # names looked up on PATH, not found
    written: tuple[str, ...]
    network: bool
    status: int | None  # None: still running after RUN_SECONDS (killed)
    stderr: str = ""


@dataclass
class Shells:
    """The namespaces and their runner, for as long as the context lasts."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="paddock-shells-")))
    _runner: subprocess.Popen[str] | None = None

    def __enter__(self) -> Shells:
        _prepare(self.root)
        self._runner = subprocess.Popen(
            ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child",
             sys.executable, __file__, str(self.root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        if self._line() != {"ready": True}:
            raise RuntimeError("the shells' namespaces did not start")
        return self

    def __exit__(self, *_: object) -> None:
        if self._runner is not None:
            self._runner.kill()
            self._runner.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self, command: str) -> dict[str, Ran]:
        """``command`` run by ``bash -c`` and by ``dash -c``, each in a fresh directory."""
        assert self._runner is not None
        assert self._runner.stdin is not None
        self._runner.stdin.write(json.dumps({"command": command}) + "\n")
        self._runner.stdin.flush()
        answer = self._line()
        return {shell: Ran(**_ran(answer[shell])) for shell in SHELLS}

    def _line(self) -> Any:
        assert self._runner is not None
        assert self._runner.stdout is not None
        line = self._runner.stdout.readline()
        if not line:
            raise RuntimeError("the shells' runner ended")
        return json.loads(line)


def _ran(data: dict[str, Any]) -> dict[str, Any]:
    data["programs"] = tuple(tuple(argv) for argv in data["programs"])
    data["missing"] = tuple(data["missing"])
    data["written"] = tuple(data["written"])
    return data


def _prepare(root: Path) -> None:
    """The shells, the real programs the running fakes run, and the fakes."""
    for name in ("shells", "real", "fakes", "log", "work", "home"):
        (root / name).mkdir()
    for name in {*SHELLS, *RUNNING.values(), "mount"}:
        found = shutil.which(name, path=SYSTEM_PATH)
        if found is None:
            raise RuntimeError(f"{name} is not installed")
        shutil.copy2(os.path.realpath(found), root / "real" / name)
    dash = root / "real" / "dash"
    for name in {*FAKES, *RUNNING}:
        record = (
            f"#!{dash}\nset -C\nn=$$\n"
            f'until {{ printf \'%s\\0\' "${{0##*/}}" "$@" > "{root}/log/$n"; }} 2>/dev/null; '
            "do n=$n.x; done\n"
        )
        if name in RUNNING:
            record += f'exec {root}/real/{RUNNING[name]} "$@"\n'
        fake = root / "fakes" / name
        fake.write_text(record)
        fake.chmod(0o755)
    for name in ("log", "work", "home"):
        (root / name).chmod(0o777)
    root.chmod(0o755)


# -- Inside the namespaces (run as a script by Shells) ------------------------------------------


def _inside(root: Path) -> None:
    """Make the file system the shells see, then run each command read from stdin."""

    def mount(*argv: str) -> None:  # (its copy: the system's goes with the first fakes)
        subprocess.run([str(root / "real" / "mount"), *argv], check=True)

    mount("--make-rprivate", "/")
    mount("--bind", str(root), str(root))
    # Every mount read-only but this directory's (and /proc, /dev: the namespace's own).
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted(set(points), key=len):
        if point != str(root) and not point.startswith(("/proc", "/dev", "/sys")):
            subprocess.run([str(root / "real" / "mount"), "-o", "remount,bind,ro", point],
                           check=point == "/", stderr=subprocess.DEVNULL)  # fmt: skip
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/dev")
    devices = {"null": (1, 3), "zero": (1, 5), "urandom": (1, 9), "tty": (5, 0)}
    for name, (major, minor) in devices.items():
        device = Path("/dev") / name
        os.mknod(device, 0o020000, os.makedev(major, minor))
        device.chmod(0o666)  # as every /dev has them
    Path("/dev/fd").symlink_to("/proc/self/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        (Path("/dev") / name).symlink_to(f"/proc/self/fd/{number}")
    for directory in map(Path, BIN_DIRECTORIES):
        if directory.is_dir() and not directory.is_symlink():
            mount("--bind", str(root / "fakes"), str(directory))
    listening = _Listening()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)["command"]
        answer = {shell: _run(root, shell, command, listening) for shell in SHELLS}
        print(json.dumps(answer), flush=True)


def _run(root: Path, shell: str, command: str, listening: _Listening) -> dict[str, Any]:
    for name in ("log", "work", "home"):
        shutil.rmtree(root / name)
        (root / name).mkdir(mode=0o777)
        (root / name).chmod(0o777)
    for relative, text in SEEDED.items():
        path = root / "work" / relative
        path.parent.mkdir(exist_ok=True, mode=0o777)
        path.parent.chmod(0o777)
        path.write_text(text)
        path.chmod(0o666)  # the command's user may write them, as an agent its files
    before = _files(root)
    process = subprocess.Popen(
        [str(root / "real" / shell), "-c", command],
        cwd=root / "work",
        env={"PATH": SYSTEM_PATH, "HOME": str(root / "home")},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        user=NOBODY, group=NOBODY, extra_groups=[], start_new_session=True,
        preexec_fn=_limits,
    )  # fmt: skip
    started = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=RUN_SECONDS)
        status: int | None = process.returncode
    except subprocess.TimeoutExpired:
        status, stderr = None, b""
    # Its background jobs run to their end too (so what they run is recorded whatever the
    # machine's load), within the same time; then whatever still runs is ended.
    while _others() and time.monotonic() - started < RUN_SECONDS:
        time.sleep(0.01)
    _end_all()
    if status is None:
        process.communicate()
    programs = []
    for record in sorted((root / "log").iterdir()):
        argv = record.read_bytes().decode(errors="replace").split("\0")[:-1]
        if argv:  # (else a background job killed as it began to record: it ran nothing)
            programs.append(argv)
    after = _files(root)
    written = sorted(path for path, state in after.items() if before.get(path) != state)
    text = stderr.decode(errors="replace")
    # What bash says when it tries a /dev/tcp or /dev/udp connection (the namespace's network
    # has no route; dash has no such paths: it opens no connection).
    network = listening.reached() or (shell == "bash" and "connect: " in text)
    missing = [name for name in NOT_FOUND.findall(text) if "/" not in name]
    return {"programs": programs, "missing": missing, "written": written, "network": network,
            "status": status, "stderr": text[-2000:]}  # fmt: skip


class _Listening:
    """Loopback, up, with TCP and UDP port 9 listened on: what a command connects to there."""

    def __init__(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
            request = struct.pack("16sh", b"lo", 0)
            flags = struct.unpack("16sh", fcntl.ioctl(control, SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))
        self.tcp = socket.create_server(("127.0.0.1", PORT))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", PORT))
        for listener in (self.tcp, self.udp):
            listener.setblocking(False)

    def reached(self) -> bool:
        """Whether anything connected or sent since the last call."""
        found = False
        with contextlib.suppress(BlockingIOError):
            while True:
                self.tcp.accept()[0].close()
                found = True
        with contextlib.suppress(BlockingIOError):
            while True:
                self.udp.recv(65536)
                found = True
        return found


def _files(root: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for top in ("work", "home"):
        for path in (root / top).rglob("*"):
            if path.is_file() or path.is_symlink():
                state = path.lstat()
                found[str(path.relative_to(root))] = (state.st_size, state.st_mtime_ns)
    return found


def _limits() -> None:
    """A command that forks without end (a recursive function in a pipeline) stops at this
    many processes of its user."""
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))


def _others() -> list[int]:
    """The processes of the namespace but this one (its first), but zombies (ended: each is
    reaped by ``_end_all``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
    return found


def _end_all() -> None:
    """Every process of the namespace but this one: a command's background jobs end with
    it (killed until none is left: one may fork as another is killed)."""
    while others := _others():
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap()
    _reap()


def _reap() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                return
        except ChildProcessError:
            return


if __name__ == "__main__":
    _inside(Path(sys.argv[1]))
