"""The local cluster's real node: pods really run there (init containers, exec, volumes), and
Paddock's sandboxes clone, set up and run commands in containers on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paddock_dev import cluster as local
from paddock_dev import images, network_policies, node
from paddock_dev.node import NodePlan
from paddock_dev.processes import ClusterState, alive, exited
from support import git_server
from support.helm import CHART, run_helm
from support.kube import Cluster
from support.runs import command_run, log_events, of_type, wait_for_run
from support.sandboxes import get, sandbox, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

ON_NODE: dict[str, Any] = {
    "nodeSelector": {node.NODE_LABEL: "real"},
    "tolerations": [{"key": node.NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}

# A volume "data" of the node's StorageClass.
CLAIM: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data"},
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": node.STORAGE_CLASS,
        "resources": {"requests": {"storage": "1Gi"}},
    },
}


def _container(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": images.SANDBOX_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c", script],
        **extra,
    }


def _pod(name: str, *, init: str, main: str = "sleep infinity", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            **ON_NODE,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "initContainers": [_container("init", init)],
            "containers": [_container("main", main)],
            **spec,
        },
    }


def _pod_status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = (get(cluster, namespace, "pod", name) or {}).get("status", {})
    return status


def _wait_ready(cluster: Cluster, namespace: str, name: str) -> None:
    cluster.kubectl(
        "wait", "-n", namespace, "--for=condition=Ready", "--timeout=90s", f"pod/{name}"
    )


def test_init_container_output_and_exit_code_are_seen_by_kubernetes(
    cluster: Cluster, namespace: str
) -> None:
    cluster.apply(_pod("ok", init="echo prepared by $(id -un)"), namespace)
    cluster.apply(_pod("broken", init="echo about to fail; exit 3"), namespace)
    _wait_ready(cluster, namespace, "ok")

    assert cluster.kubectl("logs", "-n", namespace, "ok", "-c", "init").stdout == (
        "prepared by paddock\n"  # the image's user, from its OCI config
    )
    (init,) = _pod_status(cluster, namespace, "ok")["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0
    assert _pod_status(cluster, namespace, "ok")["hostIP"] == node.host_ip()

    status = wait_for(
        lambda: (s := _pod_status(cluster, namespace, "broken")).get("phase") == "Failed" and s,
        90,
        what="the pod whose init container fails",
    )
    (failed,) = status["initContainerStatuses"]
    assert failed["state"]["terminated"]["exitCode"] == 3
    logs = cluster.kubectl("logs", "-n", namespace, "broken", "-c", "init").stdout
    assert logs == "about to fail\n"
    assert "running" not in status["containerStatuses"][0]["state"]  # never started


def test_exec_runs_inside_the_container(cluster: Cluster, namespace: str) -> None:
    pod = _pod("shell", init="true")
    pod["spec"]["securityContext"] = {"runAsUser": images.SANDBOX_UID}
    cluster.apply(pod, namespace)
    _wait_ready(cluster, namespace, "shell")

    def exec_in(script: str) -> tuple[int, str]:
        result = cluster.kubectl(
            "exec", "-n", namespace, "shell", "--", "bash", "-c", script, check=False
        )
        return result.returncode, result.stdout

    # The container's own user database, hostname and filesystem, not this host's.
    assert exec_in("id -un; hostname; ls -d /workspace") == (
        0,
        "paddock\nshell\n/workspace\n",
    )
    assert exec_in("git --version")[1].startswith("git version")
    assert exec_in("echo partial; exit 7") == (7, "partial\n")
    pid_one = exec_in("tr '\\0' ' ' < /proc/1/cmdline")[1]
    assert pid_one == "sleep infinity "  # the container's own process tree


def test_volume_is_provisioned_and_outlives_its_pod(cluster: Cluster, namespace: str) -> None:
    cluster.apply(CLAIM, namespace)
    volume_spec = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    }
    mount = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}

    writer = _pod(
        "writer", init="true", main="echo kept > /data/note; sleep infinity", **volume_spec
    )
    writer["spec"]["containers"][0] |= mount
    cluster.apply(writer, namespace)
    _wait_ready(cluster, namespace, "writer")
    pvc = get(cluster, namespace, "pvc", "data") or {}
    assert pvc["status"]["phase"] == "Bound"
    volume = get(cluster, "", "pv", pvc["spec"]["volumeName"]) or {}
    assert volume["spec"]["storageClassName"] == node.STORAGE_CLASS
    host_dir = Path(volume["spec"]["hostPath"]["path"])
    wait_for(lambda: (host_dir / "note").is_file(), 30, what="the note on the volume")

    cluster.kubectl("delete", "pod", "writer", "-n", namespace, "--wait=true", "--timeout=60s")
    reader = _pod("reader", init="true", main="cat /data/note; sleep infinity", **volume_spec)
    reader["spec"]["containers"][0] |= mount
    cluster.apply(reader, namespace)
    _wait_ready(cluster, namespace, "reader")
    wait_for(
        lambda: cluster.kubectl("logs", "-n", namespace, "reader").stdout == "kept\n",
        30,
        what="the new pod reading the note",
    )


@pytest.fixture
def repository(tmp_path: Path) -> Any:
    base = tmp_path / "git"
    base.mkdir()
    git_server.make_repository(
        base,
        "app",
        [{"README.md": "the app\n"}, {"README.md": "the app, second version\n"}],
    )
    host = node.host_ip()
    assert host is not None
    with git_server.serve(base, host) as url:
        yield f"{url}/app.git"


def _real_sandbox(name: str, workspace_name: str) -> dict[str, Any]:
    return sandbox(
        name,
        workspace_name,
        image=images.SANDBOX_IMAGE,
        storage={"size": "1Gi", "storageClassName": node.STORAGE_CLASS},
        **ON_NODE,
    )


def test_sandbox_clones_and_sets_up_then_a_run_executes_in_it(
    cluster: Cluster, namespace: str, operator: Any, repository: str
) -> None:
    setup = ["export GREETING=hello", 'echo "$GREETING, $(head -1 README.md)" > built.txt']
    cluster.apply(workspace("app", source={"git": {"url": repository}}, setup=setup), namespace)
    box = _real_sandbox("real", "app")
    # The git server is on the node's own address, which a fence leaves out unless named.
    host, port = repository.removeprefix("git://").split("/", 1)[0].rsplit(":", 1)
    egress = [{"cidrs": [f"{host}/32"], "ports": [{"port": int(port)}]}]
    box["spec"]["policy"] = {"commands": {"default": "allow"}, "network": {"egress": egress}}
    cluster.apply(box, namespace)
    status = wait_for_phase(cluster, namespace, "real", "Ready", timeout=180)
    assert status["timings"]["setupSeconds"] > 0

    pod = get(cluster, namespace, "pod", "real") or {}
    assert pod["spec"]["nodeName"] == node.NODE_NAME
    states = {s["name"]: s["state"] for s in pod["status"]["initContainerStatuses"]}
    assert "running" in states.pop("gate")  # the gate's sidecar runs as long as the pod
    inits = {name: state["terminated"] for name, state in states.items()}
    assert [inits[n]["exitCode"] for n in ("clone", "project", "setup")] == [0, 0, 0]
    clone_log = cluster.kubectl("logs", "-n", namespace, "real", "-c", "clone").stdout
    assert "clone: done" in clone_log

    def exec_in(script: str) -> str:
        return cluster.kubectl(
            "exec", "-n", namespace, "real", "-c", "sandbox", "--", "bash", "-c", script
        ).stdout

    # The real clone (shallow: one of the two commits) and the real setup, in one shell.
    assert exec_in("cat /workspace/built.txt") == "hello, the app, second version\n"
    assert exec_in("git -C /workspace rev-parse --is-shallow-repository") == "true\n"
    assert exec_in("git -C /workspace rev-list --count HEAD") == "1\n"

    cluster.apply(
        command_run("job", "real", 'id -un; echo "$PADDOCK_SANDBOX"; echo made > result.txt'),
        namespace,
    )
    run = wait_for_run(cluster, namespace, "job", timeout=120)
    assert run["phase"] == "Succeeded", json.dumps(run, indent=2)
    events = log_events(cluster, namespace, "job")
    assert [e["data"]["text"] for e in of_type(events, "output")] == ["paddock", "real"]
    # Written during the run, as the run saw it; changed against the clone's HEAD, for git.
    assert [e["data"]["path"] for e in of_type(events, "sandbox.file")] == ["result.txt"]
    assert run["changedFiles"] == ["built.txt", "result.txt"]
    assert exec_in("cat /workspace/result.txt") == "made\n"


def _mounted_under(directories: list[Path]) -> list[str]:
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    points = [line.split()[4] for line in mountinfo]
    return [p for p in points if any(p == str(d) or p.startswith(f"{d}/") for d in directories)]


def test_down_removes_what_its_node_created_and_nothing_else(
    cluster: Cluster, short_tmp: Path
) -> None:
    """A second cluster with its own real node, a pod and a volume on it; its ``down`` leaves
    no process, mount, interface, firewall rule or cgroup, and the first cluster's node runs on."""
    directory = short_tmp / "second"
    second = Cluster("second", local.up(directory, real_node=True), cluster.kubectl_binary)
    try:
        state = ClusterState.load(directory)
        assert state is not None
        mine = NodePlan.from_state(state.node)
        first = ClusterState.load(local.default_state_dir())
        assert mine is not None
        assert first is not None
        first_node = NodePlan.from_state(first.node)
        assert first_node is not None
        assert first_node.bridge != mine.bridge
        assert first_node.subnet != mine.subnet

        namespace = second.create_namespace()
        second.apply(CLAIM, namespace)
        pod = _pod(
            "busy",
            init="true",
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        )
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        second.apply(pod, namespace)
        _wait_ready(second, namespace, "busy")

        containers = node.cgroup_processes(mine.cgroup)
        started = [state.pids[c] for c in ("containerd", "kubelet", "local-path-provisioner")]
        directories = [mine.root.resolve(), mine.run_dir]
        assert containers, "no container process in the node's cgroup"
        assert _mounted_under(directories), "no container mount under the node's directories"
        assert Path(f"/sys/class/net/{mine.bridge}").is_dir()
        # The bridge keeps the address it was given (3: set), whatever ports come and go.
        bridge = Path(f"/sys/class/net/{mine.bridge}")
        assert (bridge / "addr_assign_type").read_text().strip() == "3"
        assert (bridge / "address").read_text().strip() == mine.bridge_mac
        assert node.rule_exists(node.masquerade_rule(mine))
        assert network_policies.table_exists(network_policies.controller_table(mine))
        assert network_policies.input_rule_exists(mine)
        started.append(state.pids[network_policies.COMPONENT])
    finally:
        local.down(directory)

    for pid in [*containers, *started]:
        assert exited(pid), f"process {pid} left running"
    assert _mounted_under(directories) == []
    assert not Path(f"/sys/class/net/{mine.bridge}").exists()
    assert not node.rule_exists(node.masquerade_rule(mine))
    assert not network_policies.table_exists(network_policies.controller_table(mine))
    assert not network_policies.input_rule_exists(mine)
    assert not any(d.exists() for d in node.cgroup_dirs(mine.cgroup))
    assert not mine.run_dir.exists()
    assert not directory.exists()

    # The session's cluster and its node are untouched.
    ready = cluster.kubectl(
        "get", "node", node.NODE_NAME,
        "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
    ).stdout  # fmt: skip
    assert ready == "True"
    assert node.rule_exists(node.masquerade_rule(first_node))
    assert network_policies.table_exists(network_policies.controller_table(first_node))
    assert network_policies.input_rule_exists(first_node)
    assert all(alive(first, c) for c in ("containerd", "kubelet", network_policies.COMPONENT))


def test_operator_image_runs_in_the_cluster_and_runs_an_agent(
    cluster: Cluster, namespace: str, helm: str, tmp_path: Path
) -> None:
    """The operator's image, built from the wheel without Docker, installed with the chart onto
    the real node: it reconciles a sandbox there and runs a command in it."""
    directory = local.default_state_dir()
    state = ClusterState.load(directory)
    assert state is not None
    repository, tag = local.load_image(directory, "operator").rsplit(":", 1)
    values = {
        "crds": {"enabled": False},
        "admissionPolicies": {"enabled": False},  # the tests installed them with the CRDs
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "watchNamespaces": [namespace],
        "operator": {"sandboxImage": images.SANDBOX_IMAGE},
        **ON_NODE,
        # No kube-proxy serves the kubernetes Service here: the API server's own address.
        "extraEnv": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": state.node["host_ip"]},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(state.ports["apiserver"])},
        ],
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    release = f"paddock-{namespace}"
    run_helm(
        helm, "install", release, str(CHART), "-n", namespace, "-f", str(values_file),
        "--wait", "--timeout=180s", kubeconfig=cluster.kubeconfig,
    )  # fmt: skip
    try:
        pods = cluster.kubectl(
            "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=paddock",
            "-o", "jsonpath={.items[*].spec.nodeName}",
        ).stdout  # fmt: skip
        assert pods == node.NODE_NAME

        cluster.apply(workspace("app", setup=["echo set up > ready.txt"]), namespace)
        cluster.apply(_real_sandbox("inside", "app"), namespace)
        wait_for_phase(cluster, namespace, "inside", "Ready", timeout=180)
        cluster.apply(command_run("hello", "inside", "cat ready.txt; id -un"), namespace)
        run = wait_for_run(cluster, namespace, "hello", timeout=120)
        assert run["phase"] == "Succeeded", json.dumps(run, indent=2)
        events = log_events(cluster, namespace, "hello")
        assert [e["data"]["text"] for e in of_type(events, "output")] == ["set up", "paddock"]
    finally:
        run_helm(helm, "uninstall", release, "-n", namespace, kubeconfig=cluster.kubeconfig)


def test_a_node_that_fails_to_start_leaves_kwok_running_and_says_why(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "blocked"
    # A file where the node's runtime directory must go: a real failure, early in its start.
    run_dir = node.plan(ClusterState(directory)).run_dir
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    run_dir.write_text("in the way\n")
    try:
        kubeconfig = local.up(directory)
        said = capfd.readouterr().err
        assert "the real node did not start" in said
        assert "kwok only" in said
        assert local.is_up(directory)
        state = ClusterState.load(directory)
        assert state is not None
        assert state.node == {}
        assert "kubelet" not in state.pids
        nodes = Cluster("blocked", kubeconfig, str(local.ensure_binaries().kubectl)).kubectl(
            "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"
        )
        assert nodes.stdout == local.NODE_NAME

        local.down(directory)
        with pytest.raises(local.ClusterError):  # required: the failure is the answer
            local.up(directory, real_node=True)
    finally:
        local.down(directory)
        run_dir.unlink()
