"""The examples, for real: in containers on the local cluster's real node, running the content
of the published sandbox image (built without Docker), the example Workspace is cloned (from a
repository served here: this machine reaches no git host) and set up, the example command run
succeeds, and the example agent run waits, saying why, for its API key's Secret. The image
holds the pinned Node.js and agent CLIs, and a real Claude Code from it writes a file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from paddock_dev import cluster as local
from paddock_dev import dev, images, node
from support import git_server
from support.kube import ROOT, Cluster
from support.model_server import ScriptedModel
from support.real_node import ON_NODE, exec_in
from support.runs import log_events, of_type, scripted_claude_run, wait_for_run
from support.sandboxes import (
    condition,
    get,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def sandbox_image(cluster: Cluster) -> str:
    """The published sandbox image's content, built (cached) and imported into the real node."""
    return local.load_image(local.default_state_dir(), "sandbox")


@pytest.fixture
def default_image(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Operators started in this test place sandboxes that name no placement as ``make dev``
    does on the local cluster: on the real node, their volumes of its CSI StorageClass, in that
    image."""
    placement = dev.local_placement(local.default_state_dir())
    assert placement["PADDOCK_SANDBOX_IMAGE"] == sandbox_image
    for name, value in placement.items():
        monkeypatch.setenv(name, value)
    return sandbox_image


@pytest.fixture
def hello_repository(tmp_path: Path) -> Iterator[str]:
    """The example Workspace's repository, with its branch and file, served on this host."""
    base = tmp_path / "git"
    base.mkdir()
    files = {"README": "Hello World!\n"}
    git_server.make_repository(base, "Hello-World", [files], branch="master")
    host = node.host_ip()
    assert host is not None
    with git_server.serve(base, host) as url:
        yield f"{url}/Hello-World.git"


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def _egress_to(url: str) -> list[dict[str, Any]]:
    """A rule for the repository's server: on this host's own address, which the fence of
    network: allow leaves out unless named."""
    host, port = url.removeprefix("git://").split("/", 1)[0].rsplit(":", 1)
    return [{"cidrs": [f"{host}/32"], "ports": [{"port": int(port)}]}]


def test_the_examples_clone_set_up_and_run_in_containers(
    cluster: Cluster, namespace: str, default_image: str, operator: Any, hello_repository: str
) -> None:
    hello = example("workspace.yaml")
    assert hello["spec"]["source"]["git"]["ref"] == "master"
    hello["spec"]["source"]["git"]["url"] = hello_repository
    policy = example("sandboxpolicy.yaml")
    policy["spec"]["network"]["egress"] = _egress_to(hello_repository)
    box = example("sandbox.yaml")  # as it is: ``make dev``'s placement puts it on the node
    for manifest in (hello, policy, box, example("agentrun-command.yaml")):
        cluster.apply(manifest, namespace)
    cluster.apply(example("agentrun-claude-code.yaml"), namespace)

    status = wait_for_phase(cluster, namespace, "hello", "Ready", timeout=300)
    pod = get(cluster, namespace, "pod", "hello") or {}
    assert pod["spec"]["nodeName"] == node.NODE_NAME
    assert pod["spec"]["containers"][0]["image"] == default_image
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    (claim_name,) = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                     if "persistentVolumeClaim" in v]  # fmt: skip
    claim = get(cluster, namespace, "pvc", claim_name) or {}
    assert claim["spec"]["storageClassName"] == node.CSI_STORAGE_CLASS
    states = {s["name"]: s["state"] for s in pod["status"]["initContainerStatuses"]}
    assert "running" in states.pop("gate")  # the gate's sidecar runs as long as the pod
    inits = {name: state["terminated"] for name, state in states.items()}
    assert all(done["exitCode"] == 0 for done in inits.values()), inits
    assert status["timings"]["setupSeconds"] > 0
    assert exec_in(cluster, namespace, "hello", "cat .paddock-setup-a.txt") == (
        "hello from /workspace\n"
    )
    assert exec_in(cluster, namespace, "hello", "cat README") == "Hello World!\n"

    run = wait_for_run(cluster, namespace, "hello-run", timeout=180)
    assert run["phase"] == "Succeeded", json.dumps(run, indent=2)
    said = [
        e["data"]["text"] for e in of_type(log_events(cluster, namespace, "hello-run"), "output")
    ]
    assert said[0] == "hello from hello"
    assert "README" in said
    assert exec_in(cluster, namespace, "hello", "test -s paddock-was-here.txt && echo y") == "y\n"

    agent = wait_for(
        lambda: (s := status_of(cluster, namespace, "agentrun", "hello-agent")).get("phase") and s,
        60,
        what="the example agent run's status",
    )
    found = condition(agent, "SecretsFound")
    assert (agent["phase"], found["status"], found["reason"]) == (
        "Pending", "False", "SecretNotFound",
    )  # fmt: skip
    assert "anthropic/api-key" in found["message"]
    assert "the run starts when they exist" in found["message"]


def _box(name: str, **spec: Any) -> dict[str, Any]:
    """A Sandbox of the Workspace "app" on the real node, in the operator's default image."""
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    return sandbox(name, "app", storage=storage, **ON_NODE, **spec)


# Each CLI's --version, and the package that pins it.
VERSIONS = {
    "claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
    "opencode": "opencode-ai", "gemini": "@google/gemini-cli",
}  # fmt: skip


def test_the_image_holds_the_pinned_node_and_agent_clis(
    cluster: Cluster, namespace: str, default_image: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_box("clis"), namespace)
    wait_for_phase(cluster, namespace, "clis", "Ready", timeout=180)

    def version(command: str) -> str:
        return exec_in(cluster, namespace, "clis", f"{command} --version 2>/dev/null | head -1")

    assert exec_in(cluster, namespace, "clis", "id -un; id -u") == "paddock\n1000\n"
    assert version("node") == f"v{images.NODE_VERSION}\n"
    pins = json.loads(images.AGENT_CLIS_PACKAGE.read_text())["dependencies"]
    for cli, package in VERSIONS.items():
        assert pins[package] in version(cli), cli


def test_a_real_claude_code_from_the_image_writes_a_file_in_the_workspace(
    cluster: Cluster, namespace: str, default_image: str, operator: Any
) -> None:
    host = node.host_ip()
    assert host is not None
    with ScriptedModel(["echo written > from-claude.txt"], host=host) as model:
        port = int(model.url.rsplit(":", 1)[1])
        cluster.apply(workspace("app"), namespace)
        to_model = [{"cidrs": [f"{host}/32"], "ports": [{"port": port}]}]
        policy = {"commands": {"default": "allow"}, "network": {"egress": to_model}}
        cluster.apply(_box("box", policy=policy), namespace)
        wait_for_phase(cluster, namespace, "box", "Ready", timeout=180)
        cluster.apply(secret("llm", key="sk-scripted-real-node"), namespace)
        cluster.apply(scripted_claude_run("write", "box", "Write a file.", model.url), namespace)
        status = wait_for_run(cluster, namespace, "write", timeout=240)

    events = log_events(cluster, namespace, "write")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    assert exec_in(cluster, namespace, "box", "cat from-claude.txt") == "written\n"
    assert "from-claude.txt" in [e["data"]["path"] for e in of_type(events, "sandbox.file")]
    assert any(e["data"].get("name") == "Bash" for e in of_type(events, "tool.call"))
