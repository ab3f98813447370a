"""Fixtures shared by every suite: the local cluster, a namespace per test, the operator."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kopf.testing import KopfRunner

from paddock_dev import cluster as local
from paddock_dev import processes
from paddock_dev.processes import PORTS_VARIABLE

# The operator's handlers are imported once per session; they read this when imported. A short
# resync keeps tests of idle timeouts and late-appearing objects quick.
os.environ.setdefault("PADDOCK_RESYNC_SECONDS", "1")
# Operators started by tests serve no metrics unless a test gives them a port of their own.
os.environ["PADDOCK_METRICS_PORT"] = "0"
from support import identity
from support.helm import helm_binary
from support.kube import ROOT, Cluster, across_workers
from support.ports import free_ports, share_for_clusters
from support.waiting import wait_for

# The clusters this worker starts take their ports from its own share (support.ports).
os.environ[PORTS_VARIABLE] = share_for_clusters()


@pytest.fixture(scope="session")
def operator_kubeconfig(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A kubeconfig with the operator's own ServiceAccount token (config/rbac's ClusterRole)."""
    return str(identity.operator_kubeconfig(cluster, tmp_path_factory.mktemp("identity")))


def _parallel_controller(config: pytest.Config) -> bool:
    """This process hands test files to worker processes (pytest-xdist's ``-n``)."""
    return not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))


def pytest_configure(config: pytest.Config) -> None:
    if _parallel_controller(config):
        config.stash[_CLUSTER_WAS_UP] = local.is_up(local.default_state_dir())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With workers, the first to need the cluster starts it; the controller, which outlives
    them, stops it if it was not up before the run, and forgets the run."""
    config = session.config
    if not _parallel_controller(config):
        return
    for run in local.default_state_dir().parent.glob(".test-run-*"):
        run.unlink(missing_ok=True)
    if not config.stash.get(_CLUSTER_WAS_UP, True):
        directory = local.default_state_dir()
        if local.is_up(directory):
            local.down(directory)


_CLUSTER_WAS_UP = pytest.StashKey[bool]()

# With workers (``-n``, ``--dist loadfile``), a test file's tests run together in one worker,
# sharing its module fixtures; the longest files start first, so that no worker is left with
# one of them at the end. (Tests of files that share a service of the cluster coordinate
# through locks: support.kube.object_store_in_use.)
_LONG_FIRST = ("e2e", "test_agent_clis.py", "test_object_store_logs.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return 0 if any(p in _LONG_FIRST for p in (item.path.parent.name, item.path.name)) else 1

    items.sort(key=rank)  # stable: the order within a file stays


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The local control plane: reused when it is already up, else started (and then stopped
    at the end of the run). The Paddock CRDs are installed.

    Within one run the cluster is started at most once: the first worker to need it starts it
    (or starts a broken one over), and every later worker attaches to it as it is. A part of
    it that died meanwhile (its logs are said) then fails only the tests that use that part,
    never every other worker's tests, as starting it over from under them would."""
    directory = local.default_state_dir()
    run = _test_run(request.config)
    # Parallel workers ask at the same moment: one starts the cluster, the others wait.
    with across_workers():
        if run is not None and run.exists() and _cluster_answers(directory):
            _say_what_is_down(directory)
            kubeconfig, started_here = directory / "kubeconfig", False
        else:
            started_here = not local.is_up(directory)
            kubeconfig = local.up(directory)
            if run is not None:
                run.touch()
        binaries = local.ensure_binaries()
        handle = Cluster("local", kubeconfig, str(binaries.kubectl))
        handle.install_crds()
    # kopf, running in-process, logs in through the kubernetes client's default loader.
    os.environ["KUBECONFIG"] = str(kubeconfig)
    yield handle
    if started_here and not hasattr(request.config, "workerinput"):
        local.down(directory)


def _test_run(config: pytest.Config) -> Path | None:
    """A file that says the cluster was started (or found up) in this run of the workers
    (pytest-xdist gives them one run id); None without workers."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    return local.default_state_dir().parent / f".test-run-{workerinput['testrunuid']}"


def _cluster_answers(directory: Path) -> bool:
    """Whether the cluster's API server answers ready, within the minute ``up`` gives it (a
    loaded machine answers slowly)."""
    state = local.ClusterState.load(directory)
    if state is None:
        return False
    try:
        return bool(wait_for(lambda: local.api_ready(state), local.READY_WAIT_SECONDS,
                             what="the local API server ready"))  # fmt: skip
    except TimeoutError:
        return False


def _say_what_is_down(directory: Path) -> None:
    state = local.ClusterState.load(directory)
    down = [c for c, alive in local.status(directory).items() if not alive and c != "api"]
    if state is None or not down:
        return
    for component in down:
        tail = processes.tail(state.log(component))
        print(f"cluster: {component} is down (attached as it is); the end of "
              f"{state.log(component)}:\n{tail}", file=sys.stderr)  # fmt: skip


@pytest.fixture(scope="session")
def helm() -> str:
    """The helm CLI, built through the Go module proxy and cached (hack/helm.sh)."""
    return helm_binary()


@pytest.fixture(scope="session")
def agent_clis() -> Path:
    """The real agent CLIs' bin directory (installed once by hack/agent-clis.sh, cached
    outside the repository)."""
    done = subprocess.run(
        [str(ROOT / "hack" / "agent-clis.sh")], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().rpartition("BIN=")[2])


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = cluster.create_namespace()
    yield name
    cluster.delete_namespace(name)


@dataclass
class RunningOperator:
    runner: KopfRunner
    liveness_url: str
    metrics_url: str


def _answers(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
        return bool(response.status == 200)


@pytest.fixture
def as_operator(operator_kubeconfig: str, cluster: Cluster) -> Iterator[str]:
    """While it is active, in-process operators authenticate as the operator's ServiceAccount
    (its kubeconfig is read at login), not as the admin the tests use."""
    os.environ["KUBECONFIG"] = operator_kubeconfig
    yield operator_kubeconfig
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)


@pytest.fixture
def operator(as_operator: str, namespace: str) -> Iterator[RunningOperator]:
    """``paddock operator`` in-process (the same handler module as the image's entrypoint),
    watching the test's namespace with its own least-privilege identity; at teardown it must
    have exited cleanly."""
    ports = free_ports("liveness", "metrics")
    liveness, metrics_port = f"http://127.0.0.1:{ports['liveness']}/healthz", ports["metrics"]
    args = ["run", "--standalone", "--namespace", namespace, "--liveness", liveness]
    os.environ["PADDOCK_METRICS_PORT"] = str(metrics_port)
    try:
        with KopfRunner([*args, "-m", "paddock.handlers"], timeout=60) as runner:
            wait_for(lambda: _answers(liveness), 60, what="the operator's liveness endpoint")
            yield RunningOperator(runner, liveness, f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        os.environ["PADDOCK_METRICS_PORT"] = "0"
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output
