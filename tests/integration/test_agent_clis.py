"""The REAL agent CLIs (npm, pinned in hack/agent-clis) run end to end in a sandbox against a
scripted local model server: a real agent loop makes a real tool call in the sandbox, and
Paddock records it; an endpoint that cannot serve makes a Failed run whose error says why."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.harnesses import API_KEY, harness_fields
from support.kube import ROOT, Cluster
from support.model_server import FINAL_TEXT, ScriptedModel, Write
from support.ports import free_port
from support.runs import agent_run, log_events, of_type, wait_for_run
from support.sandboxes import (
    merge_patch,
    ready_sandbox,
    sandbox,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

GATED = ["claude-code", "codex", "opencode", "gemini"]


@pytest.fixture
def closed_port() -> int:
    return free_port()


@pytest.mark.parametrize("harness", GATED)
def test_real_cli_runs_a_real_agent_loop_in_the_sandbox(
    cluster: Cluster,
    namespace: str,
    operator: Any,
    agent_clis: Path,
    tmp_path: Path,
    harness: str,
) -> None:
    ready_sandbox(cluster, namespace, "box")
    marker = "only-in-this-sandbox.txt"
    cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "bash", "-c", f'touch "$PADDOCK_WORKSPACE/{marker}"',
    )  # fmt: skip
    # With no policy the pod is the boundary: the CLI's shell runs, and writes, unasked.
    with ScriptedModel("echo written > by-the-agent.txt && ls") as model:
        fields = harness_fields(cluster, namespace, "box", harness, model.url)
        cluster.apply(agent_run("real", "box", harness, "Where are you?", **fields), namespace)
        status = wait_for_run(cluster, namespace, "real", timeout=180)

    events = log_events(cluster, namespace, "real")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    (call,) = of_type(events, "tool.call")
    assert "by-the-agent.txt" in json.dumps(call["data"]["input"])
    (result,) = of_type(events, "tool.result")
    # The tool ran in the sandbox: it lists the sandbox's workspace, the new file in it.
    assert marker in result["data"]["output"]
    assert "by-the-agent.txt" in result["data"]["output"]
    written = cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "bash", "-c", 'cat "$PADDOCK_WORKSPACE/by-the-agent.txt"',
    ).stdout  # fmt: skip
    assert written == "written\n"
    assert FINAL_TEXT in [e["data"]["text"] for e in of_type(events, "message")]
    assert status["sessionId"]
    assert of_type(events, "session-id")[0]["data"]["sessionId"] == status["sessionId"]
    assert status["usage"]["inputTokens"] > 0
    # The API key reached the CLI (it authenticated with it) and nothing stored shows it.
    sent = [r["headers"] for r in model.requests]
    keys = ("x-api-key", "authorization", "x-goog-api-key")  # Anthropic, OpenAI, Gemini
    assert any(API_KEY in "".join(h.get(k, "") for k in keys) for h in sent)
    assert API_KEY not in json.dumps(events)


@pytest.mark.parametrize("harness", ["claude-code", "codex", "opencode"])
def test_real_cli_with_an_endpoint_that_cannot_serve_fails_saying_why(
    cluster: Cluster,
    namespace: str,
    operator: Any,
    agent_clis: Path,
    tmp_path: Path,
    closed_port: int,
    harness: str,
) -> None:
    ready_sandbox(cluster, namespace, "box")
    if harness == "claude-code":
        # Nothing listens: the connection is refused.
        url, expected = f"http://127.0.0.1:{closed_port}", "Unable to connect"
        fields = harness_fields(cluster, namespace, "box", harness, url)
        cluster.apply(agent_run("down", "box", harness, "Hello?", **fields), namespace)
        status = wait_for_run(cluster, namespace, "down", timeout=180)
    else:
        # The endpoint answers with a client error: Codex 0.171 waits for a refused connection
        # indefinitely ("waiting for network"), and OpenCode retries one for about 90 s.
        with ScriptedModel("pwd", refuse_with=401) as model:
            expected = "401" if harness == "codex" else "the scripted model refuses"
            fields = harness_fields(cluster, namespace, "box", harness, model.url)
            cluster.apply(agent_run("down", "box", harness, "Hello?", **fields), namespace)
            status = wait_for_run(cluster, namespace, "down", timeout=180)

    assert status["phase"] == "Failed"
    events = log_events(cluster, namespace, "down")
    errors = [e["summary"] for e in of_type(events, "error")]
    assert any(expected in message for message in errors), errors
    assert expected in status["message"]
    assert events[-1]["type"] == "run.failed"


GATED_POLICY = {
    "commands": {
        "allow": ["touch allowed-*", "mkdir *", "echo *", "ls", "ls *"],
        "deny": ["touch denied-*", "rm *"],
        "default": "deny",
    }
}
# The files that would switch the CLI's hooks off, if the CLI read them: in the workspace and
# in the sandbox's HOME, which lives as long as the sandbox (a run's agent writing there would
# disarm the next run's gate). Claude Code refuses to let its own agent write .claude/, so the
# test writes them, as an agent could by other means.
HOOKS_OFF = {
    "claude-code": [
        ("$PADDOCK_WORKSPACE/.claude/settings.json", '{"disableAllHooks": true}'),
        ("$HOME/.claude/settings.json", '{"disableAllHooks": true}'),
    ],
    "opencode": [
        ("$PADDOCK_WORKSPACE/opencode.json", '{"plugin": [], "permission": {"bash": "allow"}}'),
        ("$HOME/.config/opencode/opencode.json", '{"plugin": [], "permission": {"bash": "allow"}}'),
    ],
    "gemini": [
        ("$PADDOCK_WORKSPACE/.gemini/settings.json", '{"hooksConfig": {"enabled": false}}'),
        ("$HOME/.gemini/settings.json", '{"hooksConfig": {"enabled": false}}'),
    ],
    "codex": [
        ("$PADDOCK_WORKSPACE/.codex/config.toml", "[features]\ncodex_hooks = false\n"),
        ("$HOME/.codex/config.toml", "\n[features]\ncodex_hooks = false\n"),
    ],
}
DENIED = [
    "touch denied-1",
    "touch allowed-2 && touch denied-2",
    'sh -c "touch denied-3"',
    "eval 'touch denied-4'",
]


@pytest.mark.parametrize("harness", GATED)
def test_the_policy_gates_every_shell_command_of_a_real_cli(
    cluster: Cluster,
    namespace: str,
    operator: Any,
    agent_clis: Path,
    tmp_path: Path,
    harness: str,
) -> None:
    ready_sandbox(cluster, namespace, "box", policy=GATED_POLICY)
    commands = ["touch allowed-1", *DENIED]
    with ScriptedModel(commands) as model:
        fields = harness_fields(cluster, namespace, "box", harness, model.url)
        for path, content in HOOKS_OFF[harness]:  # appended: Codex's user config is there
            cluster.kubectl(
                "exec", "-n", namespace, "box", "-c", "sandbox", "--", "bash", "-c",
                f'mkdir -p "$(dirname "{path}")" && printf %s {shlex.quote(content)} >> "{path}"',
            )  # fmt: skip
        cluster.apply(agent_run("gated", "box", harness, "Touch files.", **fields), namespace)
        status = wait_for_run(cluster, namespace, "gated", timeout=240)
        asked = list(model.requests)

    events = log_events(cluster, namespace, "gated")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    seen = json.dumps(asked[-1]["body"])
    assert of_type(events, "sandbox.ready")[0]["data"]["policy"] == "inline"
    assert of_type(events, "run.started")[0]["data"]["policy"] == "inline"
    listing = cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "bash", "-c", 'ls -A "$PADDOCK_WORKSPACE"',
    ).stdout.split()  # fmt: skip
    assert "allowed-1" in listing  # an allowed command runs
    # Nothing of a denied command runs: not its denied part, nor what precedes it.
    assert [name for name in listing if name.startswith("denied-")] == []
    assert "allowed-2" not in listing
    denied = of_type(events, "policy.denied")
    assert [e["data"]["command"] for e in denied] == DENIED
    assert {e["data"]["part"] for e in denied} == {f"touch denied-{i}" for i in range(1, 5)}
    # The agent was told, with the rule that refused it.
    assert seen.count("Paddock policy") >= len(DENIED)
    assert "touch denied-*" in seen
    if harness == "opencode":  # its plugin package counted as there: nothing was fetched
        fetched = cluster.kubectl(
            "exec", "-n", namespace, "box", "-c", "sandbox", "--",
            "bash", "-c", 'ls -A "$PADDOCK_RUN_DIR"/*/config/opencode/node_modules',
        ).stdout  # fmt: skip
        assert fetched == ""


ASKING_POLICY = {"commands": {"allow": ["echo *"], "ask": ["touch asked-*"], "default": "deny"}}


def _pending(cluster: Cluster, namespace: str, name: str, count: int) -> dict[str, Any]:
    """The run's status once it awaits approval of its ``count``-th request."""
    return wait_for(
        lambda: (
            (s := status_of(cluster, namespace, "agentrun", name)).get("phase")
            == "AwaitingApproval"
            and len(s.get("approvals", [])) == count
            and s
        ),
        180,
        what=f"run {name} awaiting approval of request {count}",
    )


@pytest.mark.parametrize("harness", GATED)
def test_a_command_the_policy_asks_about_waits_for_a_person(
    cluster: Cluster,
    namespace: str,
    operator: Any,
    agent_clis: Path,
    tmp_path: Path,
    harness: str,
) -> None:
    ready_sandbox(cluster, namespace, "box", policy=ASKING_POLICY)
    with ScriptedModel(["touch asked-1", "touch asked-2", "touch asked-3"]) as model:
        fields = harness_fields(cluster, namespace, "box", harness, model.url)
        run = agent_run("asks", "box", harness, "Touch files.", **fields)
        # Long enough for the test's own steps however loaded the machine is: a 15-second
        # timeout expired the first request under load before the test could approve it.
        run["spec"]["approvalTimeout"] = "10m"
        cluster.apply(run, namespace)
        # Approved: it runs.
        status = _pending(cluster, namespace, "asks", 1)
        assert status["pendingApprovals"] == 1
        (first,) = status["approvals"]
        assert first["target"] == "touch asked-1"
        assert first["rules"] == ["ask: touch asked-*"]
        described = cluster.kubectl("describe", "agentrun", "asks", "-n", namespace).stdout
        assert "ApprovalRequested" in described
        approved = cluster.paddock("approve", "asks", "-n", namespace)
        assert first["id"] in approved.stdout
        # Denied: it does not.
        status = _pending(cluster, namespace, "asks", 2)
        assert status["approvals"][0]["state"] == "Approved"
        cluster.paddock("deny", "asks", status["approvals"][1]["id"], "-n", namespace)
        # Nobody decides: the timeout denies it (the run's timeout, shortened now, is read at
        # each step).
        _pending(cluster, namespace, "asks", 3)
        merge_patch(cluster, namespace, "agentrun", "asks", {"spec": {"approvalTimeout": "1s"}})
        status = wait_for_run(cluster, namespace, "asks", timeout=180)
        seen = json.dumps(model.requests[-1]["body"])

    events = log_events(cluster, namespace, "asks")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    assert [a["state"] for a in status["approvals"]] == ["Approved", "Denied", "Expired"]
    assert status["pendingApprovals"] == 0
    listing = cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "bash", "-c", 'ls -A "$PADDOCK_WORKSPACE"',
    ).stdout.split()  # fmt: skip
    assert "asked-1" in listing
    assert "asked-2" not in listing
    assert "asked-3" not in listing
    assert len(of_type(events, "approval.requested")) == 3
    resolved = of_type(events, "approval.resolved")
    assert [e["data"]["state"] for e in resolved] == ["Approved", "Denied", "Expired"]
    assert seen.count("was not approved") >= 2  # the agent was told, both times


def test_the_approval_example_runs_end_to_end(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, tmp_path: Path
) -> None:
    """examples/agentrun-approval.yaml under examples/sandboxpolicy.yaml: the agent's commit
    waits for `paddock approve`, then runs."""
    examples = ROOT / "examples"
    policy = yaml.safe_load((examples / "sandboxpolicy.yaml").read_text())
    run = yaml.safe_load((examples / "agentrun-approval.yaml").read_text())
    cluster.apply(policy, namespace)
    ready_sandbox(cluster, namespace, "box", policyRef={"name": policy["metadata"]["name"]})
    name = run["metadata"]["name"]
    commit = "git commit -am 'Fix a typo in the README'"
    with ScriptedModel([commit]) as model:
        fields = harness_fields(cluster, namespace, "box", "claude-code", model.url)
        # The example's own modelKey, naming the test's Secret: without a gateway the harness
        # gets the key in its environment (its ModelRoute condition says so).
        del fields["secrets"]
        run["spec"]["modelKey"]["secretKeyRef"] = {"name": "llm", "key": "key"}
        run["spec"] |= {"sandboxRef": {"name": "box"}, **fields}
        cluster.apply(run, namespace)
        status = _pending(cluster, namespace, name, 1)
        assert status["approvals"][0]["target"] == commit
        table = cluster.kubectl("get", "run", name, "-n", namespace).stdout.splitlines()
        header, row = table[0].split(), table[1].split()
        assert row[header.index("PHASE")] == "AwaitingApproval"
        assert row[header.index("APPROVALS")] == "1"
        cluster.paddock("approve", name, "-n", namespace)
        status = wait_for_run(cluster, namespace, name, timeout=120)

    events = log_events(cluster, namespace, name)
    assert status["phase"] == "Succeeded", (status, events[-3:])
    assert status["approvals"][0]["state"] == "Approved"
    # It ran: git itself answered (the sandbox's workspace is no repository).
    results = [json.dumps(e["data"]) for e in of_type(events, "tool.result")]
    assert any("not a git repository" in r for r in results), results
    assert not any("Paddock policy" in r for r in results)


def _workspace_path(cluster: Cluster, namespace: str, sandbox: str) -> str:
    return cluster.kubectl(
        "exec", "-n", namespace, sandbox, "-c", "sandbox", "--",
        "bash", "-c", 'printf %s "$PADDOCK_WORKSPACE"',
    ).stdout  # fmt: skip


FILE_WRITE_MODES = ("allow", "deny", "ask")


@pytest.mark.parametrize("harness", GATED)
def test_file_write_reaches_the_clis_own_file_tool(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, harness: str
) -> None:
    """Each of allow, deny and ask, in a sandbox of its own (a policy is a sandbox's), the
    three runs at once. Codex writes with its patch tool (``apply_patch``), which a model it
    knows is offered (gpt-5.5; the tests' gpt-5 writes with a shell redirection, judged as
    the command it is)."""
    allowed = ["echo *", "printf *"]
    cluster.apply(workspace("app"), namespace)
    for mode in FILE_WRITE_MODES:
        policy = {"commands": {"allow": allowed}, "capabilities": {"fileWrite": mode}}
        cluster.apply(sandbox(f"box-{mode}", "app", policy=policy), namespace)
    paths, statuses = {}, {}
    with contextlib.ExitStack() as stack:
        for mode in FILE_WRITE_MODES:
            box = f"box-{mode}"
            wait_for_phase(cluster, namespace, box, "Ready")
            paths[mode] = f"{_workspace_path(cluster, namespace, box)}/NOTES.md"
            model = stack.enter_context(ScriptedModel(Write(paths[mode], "written by the agent\n")))
            fields = harness_fields(cluster, namespace, box, harness, model.url)
            if harness == "codex":
                fields["model"] = "gpt-5.5"
            run = agent_run(f"writes-{mode}", box, harness, "Write notes.", **fields)
            cluster.apply(run, namespace)
        (approval,) = _pending(cluster, namespace, "writes-ask", 1)["approvals"]
        assert approval["kind"] == "file-write"
        if harness == "codex":  # the person is shown the whole patch
            assert approval["target"] == (
                f"*** Begin Patch\n*** Add File: {paths['ask']}\n+written by the agent\n"
                "*** End Patch\n"
            )
        else:
            assert approval["target"] == paths["ask"]
        cluster.paddock("approve", "writes-ask", "-n", namespace)
        for mode in FILE_WRITE_MODES:
            statuses[mode] = wait_for_run(cluster, namespace, f"writes-{mode}", timeout=240)
    for mode in FILE_WRITE_MODES:
        _assert_written_as_the_policy_says(cluster, namespace, harness, mode, paths[mode],
                                           statuses[mode])  # fmt: skip


def _assert_written_as_the_policy_says(
    cluster: Cluster, namespace: str, harness: str, mode: str, path: str, status: dict[str, Any]
) -> None:
    events = log_events(cluster, namespace, f"writes-{mode}")
    assert status["phase"] == "Succeeded", (mode, status, events[-3:])
    written = cluster.kubectl(
        "exec", "-n", namespace, f"box-{mode}", "-c", "sandbox", "--",
        "bash", "-c", f"cat {shlex.quote(path)} 2>/dev/null || echo absent",
    ).stdout  # fmt: skip
    if mode != "deny":
        assert written == "written by the agent\n", mode
        return
    assert written.strip() == "absent"
    if harness == "codex":  # its patch, which the gate refused
        (denied,) = of_type(events, "policy.denied")
        assert denied["data"]["kind"] == "file-write"
        assert f"*** Add File: {path}" in denied["data"]["command"]
        return
    # The CLI refused its own tool (OpenCode offers no write tool at all), and the agent was
    # told.
    (result,) = of_type(events, "tool.result")
    said = str(result["data"]["output"])
    assert result["data"]["isError"] or "unavailable tool" in said, said


# What a CLI does when the hook that runs the gate is killed while its command waits for a
# person (docs/policy.md, per CLI): Claude Code and OpenCode refuse the command; Gemini CLI runs
# it, through Paddock's shell, which refuses it; Codex runs a command whose hook failed other
# than by blocking.
KILLED_HOOK_RUNS = {"claude-code": False, "opencode": False, "codex": True, "gemini": False}


def _command_line(pid: int) -> tuple[str, int]:
    """A process's command line and its parent's pid ("" when it is gone)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return "", 0
    return command, parent


def _waiting_hook(namespace: str) -> list[int]:
    """The processes of the hook waiting in the namespace's kwok pod (its processes run on
    this machine, under the pod's directory): the gate client, and the shell that runs it
    where there is one; all of them, as ``pkill -f gate.mjs`` finds them."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        command, parent = _command_line(int(proc.name))
        argv = command.split()
        # The client: node running gate.mjs from the pod's control directory.
        if len(argv) > 1 and argv[1].endswith("/gate.mjs") and f"/{namespace}/" in argv[1]:
            program = _command_line(parent)[0].split(" ", 1)[0].rsplit("/", 1)[-1]
            shell = program in ("sh", "bash", "dash")  # else the CLI spawned it itself
            return [parent, int(proc.name)] if shell else [int(proc.name)]
    return []


@pytest.mark.parametrize("harness", GATED)
def test_a_hook_killed_while_its_command_waits_blocks_or_not_as_the_docs_say(
    cluster: Cluster,
    namespace: str,
    operator: Any,
    agent_clis: Path,
    harness: str,
) -> None:
    ready_sandbox(cluster, namespace, "box", policy=ASKING_POLICY)
    with ScriptedModel(["touch asked-1"]) as model:
        fields = harness_fields(cluster, namespace, "box", harness, model.url)
        cluster.apply(agent_run("killed", "box", harness, "Touch.", **fields), namespace)
        _pending(cluster, namespace, "killed", 1)
        for pid in wait_for(lambda: _waiting_hook(namespace), 30, what="the waiting hook"):
            os.kill(pid, signal.SIGKILL)
        status = wait_for_run(cluster, namespace, "killed", timeout=180)

    events = log_events(cluster, namespace, "killed")
    assert status["phase"] == "Succeeded", (status["message"], [e["summary"] for e in events[-6:]])
    listing = cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--",
        "bash", "-c", 'ls -A "$PADDOCK_WORKSPACE"',
    ).stdout.split()  # fmt: skip
    assert ("asked-1" in listing) is KILLED_HOOK_RUNS[harness], listing
