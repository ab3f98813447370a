"""The local cluster's git forge: Gitea over SQLite, on a loopback port, for deliveries (an
AgentRun's spec.deliver pushes a branch and opens a pull request there). Started the first time
something asks for it (``ensure``), and stopped with the cluster.

Its administrator's password is made at its first start and kept in a file of the cluster's
directory (mode 0600); ``ensure`` returns it with the forge's address."""

from __future__ import annotations

import fcntl
import json
import secrets
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from paddock_dev.binaries import Binaries
from paddock_dev.processes import (
    ClusterError,
    ClusterState,
    alive,
    free_ports,
    spawn,
    terminate,
    wait_until,
)

COMPONENT = "forge"
ADMIN = "paddock"


@dataclass(frozen=True)
class Forge:
    url: str  # http://127.0.0.1:PORT
    admin: str
    password: str


def root(state: ClusterState) -> Path:
    return state.directory / COMPONENT


def _config(state: ClusterState, binaries: Binaries) -> str:
    port, work = state.ports[COMPONENT], root(state)
    return f"""APP_NAME = Paddock's local forge
RUN_MODE = prod
WORK_PATH = {work}
; the local cluster runs as root; Gitea's guard against that is for shared machines
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = {port}
ROOT_URL = http://127.0.0.1:{port}/
STATIC_ROOT_PATH = {binaries.gitea_dir}
DISABLE_SSH = true
OFFLINE_MODE = true

[database]
DB_TYPE = sqlite3
PATH = {work}/gitea.db

[security]
INSTALL_LOCK = true

[repository]
ROOT = {work}/repositories

[service]
DISABLE_REGISTRATION = true

[log]
LEVEL = warn
"""


def ensure(binaries: Binaries, state: ClusterState) -> Forge:
    """The forge, started if it is not running (one caller at a time: a lock in the
    cluster's directory)."""
    with (state.directory / "forge.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = ClusterState.load(state.directory)
        if fresh is None:
            raise ClusterError("the local cluster is not up")
        if not alive(fresh, COMPONENT):
            _start(binaries, fresh)
        return _credentials(fresh)


def stop(state: ClusterState) -> None:
    """Stop the forge, keeping its repositories (``ensure`` serves them again, on its port)."""
    fresh = ClusterState.load(state.directory) or state
    if alive(fresh, COMPONENT):
        terminate([fresh.pids[COMPONENT]])


def _start(binaries: Binaries, state: ClusterState) -> None:
    work = root(state)
    work.mkdir(exist_ok=True)
    passwords = work / "admin.json"
    if COMPONENT not in state.ports:  # started again: on its port, which URLs name
        state.ports |= free_ports((COMPONENT,))
        state.record(COMPONENT)
    config = work / "app.ini"
    config.write_text(_config(state, binaries))
    gitea = [str(binaries.gitea), "--config", str(config), "--work-path", str(work)]
    if not passwords.is_file():
        _run([*gitea, "migrate"], state)
        password = secrets.token_urlsafe(18)
        _run([*gitea, "admin", "user", "create", "--username", ADMIN, "--password", password,
              "--email", "paddock@forge.invalid", "--admin",
              "--must-change-password=false"], state)  # fmt: skip
        passwords.touch(mode=0o600)
        passwords.write_text(json.dumps({"admin": ADMIN, "password": password}))
    process = spawn(state, COMPONENT, [*gitea, "web"])
    url = f"http://127.0.0.1:{state.ports[COMPONENT]}"
    wait_until(state, COMPONENT, process, lambda: _answers(url), "serving its API")


def _run(argv: list[str], state: ClusterState) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, cwd=state.directory, check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-500:]
        raise ClusterError(f"forge: {argv[3]} {argv[4] if len(argv) > 4 else ''} failed: {said}")


def _credentials(state: ClusterState) -> Forge:
    saved = json.loads((root(state) / "admin.json").read_text())
    url = f"http://127.0.0.1:{state.ports[COMPONENT]}"
    return Forge(url, saved["admin"], saved["password"])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/version", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False
