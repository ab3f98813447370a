"""The local cluster's processes: started in their own sessions, recorded in ``state.json``
before anything waits on them, and stopped by process group."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddock_dev.certs import Pki

START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0


class ClusterError(RuntimeError):
    """The local cluster could not be started; the message says which part and why."""


@dataclass
class ClusterState:
    """What ``up`` started, persisted so that ``status`` and ``down`` can find it."""

    directory: Path
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)
    # The real node's host resources (bridge, subnet, cgroup, ...), when it has one.
    node: dict[str, Any] = field(default_factory=dict)

    @property
    def file(self) -> Path:
        return self.directory / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def pki(self) -> Pki:
        return Pki(self.directory / "pki")

    @property
    def pods_dir(self) -> Path:
        return self.directory / "pods"

    @property
    def volumes_dir(self) -> Path:
        return self.directory / "volumes"

    def log(self, component: str) -> Path:
        return self.directory / "logs" / f"{component}.log"

    def save(self) -> None:
        """Write the whole state (a cluster set up or taken down: one process at a time), at
        once: a reader never sees half of it."""
        with self._locked():
            self._write()

    def record(self, *keys: str) -> None:
        """Write this state's entries of ``keys`` (a component's pid and command, a port) into
        the state as the file holds it now, and take the rest from there. The tests' workers
        start and stop components side by side: a state read before another worker restarted
        one must not put its old pid back (a stop would then miss the running one)."""
        with self._locked():
            current = ClusterState.load(self.directory) or self
            for key in keys:
                _take(current.pids, self.pids, key)
                _take(current.ports, self.ports, key)
                _take(current.commands, self.commands, key)
            self.ports, self.pids = dict(current.ports), dict(current.pids)
            self.commands = dict(current.commands)
            self._write()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / "state.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _write(self) -> None:
        data = {"ports": self.ports, "pids": self.pids, "commands": self.commands,
                "node": self.node}  # fmt: skip
        written = self.file.with_suffix(f".{os.getpid()}.tmp")
        written.write_text(json.dumps(data))
        written.replace(self.file)

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        path = directory / "state.json"
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return cls(directory, data["ports"], data["pids"], data["commands"], data.get("node", {}))


def _take(into: dict[str, Any], source: dict[str, Any], key: str) -> None:
    if key in source:
        into[key] = source[key]
    else:
        into.pop(key, None)


# --- processes ---------------------------------------------------------------------------------


# The local cluster's servers listen on ports below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default): between a port's choice and its
# server's bind, no outgoing connection and no server asking for port 0 can take it.
# PADDOCK_CLUSTER_PORTS ("LOW-HIGH") narrows the range, so that clusters started side by side
# (the tests' workers) never offer each other's ports.
PORTS_VARIABLE = "PADDOCK_CLUSTER_PORTS"
CLUSTER_PORTS = range(10000, 20000)

_next_offset: dict[range, int] = {}


def cluster_ports() -> range:
    text = os.environ.get(PORTS_VARIABLE, "")
    if not text:
        return CLUSTER_PORTS
    low, _, high = text.partition("-")
    try:
        return range(int(low), int(high) + 1)
    except ValueError:
        raise ClusterError(
            f"{PORTS_VARIABLE} is {text!r}: it should be LOW-HIGH, for example 10000-19999"
        ) from None


def free_ports(names: tuple[str, ...], ports: range | None = None) -> dict[str, int]:
    """Distinct ports of ``ports`` (the cluster's range by default) that nothing is bound to.

    Every one stays bound until all are chosen; this process then goes on round the range from
    the last, so that it does not offer a port again while the server it was chosen for may
    still be starting."""
    span = ports or cluster_ports()
    start = _next_offset.get(span, random.randrange(len(span)))  # noqa: S311  (not a secret)
    chosen: list[socket.socket] = []
    try:
        for step in range(len(span)):
            if len(chosen) == len(names):
                break
            offset = (start + step) % len(span)
            sock = socket.socket()
            try:
                sock.bind(("0.0.0.0", span[offset]))  # noqa: S104  (binds nothing; only probes)
            except OSError:
                sock.close()
                continue
            chosen.append(sock)
            _next_offset[span] = (offset + 1) % len(span)
        if len(chosen) < len(names):
            raise ClusterError(f"fewer than {len(names)} free ports in {span.start}-{span[-1]}")
        return {name: sock.getsockname()[1] for name, sock in zip(names, chosen, strict=True)}
    finally:
        for sock in chosen:
            sock.close()


def is_ours(pid: int, command: str) -> bool:
    """Whether ``pid`` is still the process we started (pids are reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == command


def alive(state: ClusterState, component: str) -> bool:
    pid = state.pids.get(component)
    return pid is not None and is_ours(pid, state.commands[component])


def spawn(
    state: ClusterState, component: str, argv: list[str], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    state.log(component).parent.mkdir(parents=True, exist_ok=True)
    with state.log(component).open("ab") as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=state.directory,
            env=env,
        )
    state.pids[component] = process.pid
    state.commands[component] = argv[0]
    state.record(component)
    return process


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_until(
    state: ClusterState,
    component: str,
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    what: str,
) -> None:
    """Poll ``ready`` until it holds; fail early, with the log, if the component exits."""
    started = time.monotonic()
    while not ready():
        if process.poll() is not None:
            raise ClusterError(
                f"{component} exited with code {process.returncode} before {what}; last lines "
                f"of {state.log(component)}:\n{tail(state.log(component))}"
            )
        if time.monotonic() - started > START_TIMEOUT:
            raise ClusterError(
                f"{component}: no {what} after {START_TIMEOUT:.0f}s; last lines of "
                f"{state.log(component)}:\n{tail(state.log(component))}"
            )
        time.sleep(0.1)
    print(f"  {component}: {what} ({time.monotonic() - started:.1f}s)", file=sys.stderr)


ESTABLISHED = '{.status.conditions[?(@.type=="Established")].status}'


def wait_established(kubectl: Sequence[str], crds: Sequence[str], timeout: float = 60.0) -> None:
    """Wait until every CRD in ``crds`` (``crd/<name>``) is Established.

    ``kubectl wait --for=condition=Established`` fails instead of waiting on a CRD created an
    instant ago, whose ``status.conditions`` is still null; reading the condition does not.
    ``kubectl`` is the command line up to its subcommand (binary and kubeconfig flag).
    """
    deadline = time.monotonic() + timeout
    for crd in crds:
        while True:
            result = subprocess.run(
                [*kubectl, "get", crd, "-o", f"jsonpath={ESTABLISHED}"],
                capture_output=True,
                text=True,
            )
            if result.returncode == 0 and result.stdout.strip() == "True":
                break
            if time.monotonic() > deadline:
                said = result.stderr.strip() or f"Established is {result.stdout.strip() or 'unset'}"
                raise ClusterError(f"{crd} is not Established after {timeout:.0f}s: {said}")
            time.sleep(0.1)


def terminate(pids: list[int]) -> None:
    for pid in pids:
        try:
            # Each component leads its own session and process group; stop the whole group.
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        remaining = [pid for pid in remaining if not exited(pid)]
        if remaining:
            time.sleep(0.05)
    for pid in remaining:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def exited(pid: int) -> bool:
    """Whether the process runs no more: gone, or a zombie its parent has not reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True
