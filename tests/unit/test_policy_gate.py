"""The exec gate's decisions: setup steps before any pod, a command run before its launch, the
policy a sandbox runs under, a SandboxPolicy's Valid condition, and `paddock policy check`."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from paddock.agentruns.asking import Asking
from paddock.agentruns.decide import Asked, Ending, Wait, gated
from paddock.agentruns.sandbox import policy_of
from paddock.api.approvals import ApprovalChoice
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.sandbox import Sandbox, SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.cli.main import main
from paddock.policy.check import problems
from paddock.policy.choice import choose_policy
from paddock.policy.gate import judge_command, judge_setup
from paddock.sandboxes.decide import decide_sandbox
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.plan import Create, Delete, Loaded
from paddock.sandboxes.policy import decide_policy
from support.pods import pod, running, terminated

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
CAREFUL = SandboxPolicySpec.model_validate(
    {"commands": {"allow": ["make*", "echo *"], "ask": ["git commit*"], "deny": ["curl*"]}}
)
Obj = dict[str, Any]


def sandbox_body(spec: Obj | None = None, status: Obj | None = None) -> Obj:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": "sbx", "namespace": "team", "uid": "uid-1", "generation": 1},
        "spec": spec or {"workspaceRef": {"name": "ws"}, "policyRef": {"name": "careful"}},
        "status": status or {},
    }


def world(
    setup: list[Any], policy: SandboxPolicySpec | None = CAREFUL, **parts: Any
) -> SandboxWorld:
    body = parts.pop("body", sandbox_body())
    spec = SandboxSpec.model_validate(body["spec"])
    choice = choose_policy(spec, "team", parts.pop("default", None))
    loaded = Loaded("careful", policy) if choice.name is not None else None
    return SandboxWorld(
        body,
        Loaded("sbx", spec),
        Loaded("ws", WorkspaceSpec.model_validate({"setup": setup})),
        loaded,
        choice,
        **parts,
    )


def test_allowed_setup_creates_the_pod_and_counts_each_step() -> None:
    plan = decide_sandbox(world(["make deps", {"parallel": ["echo a", "make b"]}]), "img", NOW)
    assert any(isinstance(w, Create) and w.obj["kind"] == "Pod" for w in plan.writes)
    assert plan.policy_decisions == [Decision.ALLOW] * 3
    assert plan.status.to_api()["policy"] == "careful"


def test_a_denied_setup_step_fails_the_sandbox_before_any_pod() -> None:
    plan = decide_sandbox(world(["make", {"parallel": ["echo a", "curl -s x | sh"]}]), "i", NOW)
    status = plan.status.to_api()
    assert status["phase"] == "Failed"
    assert plan.writes == []  # no pod, volume, files or NetworkPolicy
    message = status["message"]
    assert "setup[1].parallel[1]" in message
    assert "deny: curl*" in message
    assert [n.reason for n in plan.notices] == ["PolicyDenied"]
    assert plan.policy_decisions == [Decision.DENY]


def test_a_setup_step_that_needs_approval_waits() -> None:
    plan = decide_sandbox(world(["git commit -m x"]), "img", NOW)
    status = plan.status.to_api()
    assert status["phase"] == "Pending"
    assert status["conditions"][0]["reason"] == "ApprovalRequired"
    assert "ask: git commit*" in status["message"]


def test_a_denied_step_stops_setup_already_under_way() -> None:
    setting_up = pod(init=[terminated("clone", 0), running("setup")])
    setting_up["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "Sandbox",
            "name": "sbx",
            "uid": "uid-1",
            "controller": True,
        }
    ]
    plan = decide_sandbox(world(["curl x"], pod=setting_up), "img", NOW)
    assert [w.kind for w in plan.writes if isinstance(w, Delete)] == ["Pod"]


def test_a_prepared_sandbox_is_not_gated_again() -> None:
    prepared = sandbox_body(
        status={
            "conditions": [
                {
                    "type": "SetupComplete",
                    "status": "True",
                    "reason": "Prepared",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    )
    plan = decide_sandbox(world(["curl x"], body=prepared), "img", NOW)
    assert plan.status.to_api()["phase"] != "Failed"


def test_no_policy_leaves_setup_unrestricted_and_required_refuses_it() -> None:
    spec = {"workspaceRef": {"name": "ws"}}
    free = decide_sandbox(world(["curl x"], body=sandbox_body(spec)), "img", NOW)
    assert free.status.to_api()["phase"] == "Provisioning"
    assert "policy" not in free.status.to_api()
    required = world(["make"], body=sandbox_body(spec), policy_required=True)
    refused = decide_sandbox(required, "img", NOW).status.to_api()
    assert (refused["phase"], refused["conditions"][0]["reason"]) == ("Failed", "PolicyRequired")


def test_the_default_policy_applies_to_a_sandbox_that_names_none() -> None:
    spec = {"workspaceRef": {"name": "ws"}}
    plan = decide_sandbox(world(["curl x"], body=sandbox_body(spec), default="careful"), "i", NOW)
    assert plan.status.to_api()["phase"] == "Failed"
    assert plan.status.to_api()["policy"] == "careful"
    other = choose_policy(SandboxSpec.model_validate(spec), "team", "platform/base")
    assert (other.namespace, other.name, other.label) == ("platform", "base", "platform/base")


def test_a_run_is_checked_against_the_policy_its_sandbox_records() -> None:
    body = {
        "metadata": {"name": "sbx", "namespace": "team"},
        "spec": {"workspaceRef": {"name": "ws"}},
        "status": {"policy": "platform/base"},
    }
    choice = policy_of(Sandbox.model_validate(body))
    assert (choice.namespace, choice.name) == ("platform", "base")
    body["spec"]["policy"] = {"commands": {"default": "deny"}}
    assert policy_of(Sandbox.model_validate(body)).inline is not None


NOBODY_ASKED = Asking([], {}, NOW, timedelta(minutes=15), "15m")


@pytest.mark.parametrize(
    ("command", "expected", "reason"),
    [
        ("make test && echo ok", None, None),
        ("make test; curl x", Ending, "PolicyDenied"),
    ],
)
def test_a_command_run_launches_only_when_allowed(
    command: str, expected: type | None, reason: str | None
) -> None:
    result = gated(CAREFUL, judge_command(CAREFUL, command, {}), NOBODY_ASKED)
    if expected is None:
        assert result is None
        return
    assert isinstance(result, expected)
    assert result.reason == reason
    assert result.phase == "Failed"


def test_a_command_run_that_needs_approval_waits_as_a_request_of_its_own() -> None:
    judged = judge_command(CAREFUL, "git commit -am wip", {})
    asked = gated(CAREFUL, judged, NOBODY_ASKED)
    assert isinstance(asked, Asked)
    assert asked.pending
    assert asked.ending is None
    (approval,) = asked.answered.approvals
    assert (approval.kind, approval.state) == ("command", "Pending")
    assert approval.id.startswith("command.")  # its random part: not decidable ahead
    assert approval.rules == ["ask: git commit*"]
    assert [d.type for d in asked.answered.drafts] == ["approval.requested"]
    again = gated(CAREFUL, judged, replace(NOBODY_ASKED, approvals=asked.answered.approvals))
    assert isinstance(again, Asked)
    assert again.pending
    assert again.answered.drafts == []
    assert again.answered.notices == []


@pytest.mark.parametrize(
    ("choice", "later", "reason"),
    [
        ("approve", timedelta(0), None),
        ("approve-always", timedelta(0), None),
        ("deny", timedelta(0), "ApprovalDenied"),
        (None, timedelta(minutes=15), "ApprovalExpired"),
    ],
)
def test_a_command_run_launches_once_approved_and_fails_when_refused(
    choice: str | None, later: timedelta, reason: str | None
) -> None:
    judged = judge_command(CAREFUL, "git commit -am wip", {})
    first = gated(CAREFUL, judged, NOBODY_ASKED)
    assert isinstance(first, Asked)
    (approval,) = first.answered.approvals
    choices = {approval.id: (ApprovalChoice(choice), str(approval.digest))} if choice else {}
    asking = Asking(first.answered.approvals, choices, NOW + later, timedelta(minutes=15), "15m")
    decided = gated(CAREFUL, judged, asking)
    assert isinstance(decided, Asked)
    assert not decided.pending
    assert [d.type for d in decided.answered.drafts] == ["approval.resolved"]
    if reason is None:
        assert decided.ending is None
        return
    assert decided.ending is not None
    assert (decided.ending.phase, decided.ending.reason) == ("Failed", reason)
    assert decided.ending.message.startswith("The command `git commit -am wip` needed approval")


def test_a_command_run_waits_while_its_policy_cannot_be_had() -> None:
    result = gated("SandboxPolicy careful is not found", None, NOBODY_ASKED)
    assert isinstance(result, Wait)
    assert result.reason == "PolicyNotFound"


def test_setup_commands_may_name_workspace_scripts() -> None:
    policy = SandboxPolicySpec.model_validate({"commands": {"allow": ["deps"], "default": "deny"}})
    workspace = WorkspaceSpec.model_validate(
        {
            "setup": ["pnpm install --frozen-lockfile"],
            "scripts": {"deps": "pnpm install --frozen-lockfile"},
        }
    )
    assert [j.decision for j in judge_setup(policy, workspace)] == [Decision.ALLOW]


def test_rules_that_cannot_work_are_named() -> None:
    spec = SandboxPolicySpec.model_validate(
        {
            "commands": {
                "allow": [" ls", "npm test && npm lint", "echo 'hi'", "git  status", "rm *"],
                "deny": ["rm *"],
            },
            "network": {"egress": [{"cidrs": ["127.0.0.0/8"]}]},
        }
    )
    found = problems(spec)
    assert len(found) == 6, found
    assert any("commands.allow[1]" in p and "'&&'" in p for p in found)
    assert any("network.egress[0]" in p for p in found)
    assert problems(CAREFUL) == []


def test_a_policys_valid_condition_and_its_event() -> None:
    body = {"metadata": {"name": "p", "generation": 2}, "spec": {"commands": {"allow": [" ls"]}}}
    plan = decide_policy(body, NOW)
    status = plan.status.to_api()
    assert status["observedGeneration"] == 2
    condition = status["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Valid",
        "False",
        "RulesIneffective",
    )
    assert [n.type for n in plan.notices] == ["Warning"]
    again = decide_policy({**body, "status": status}, NOW)
    assert again.notices == []  # said once
    fixed = decide_policy({**body, "spec": {}, "status": status}, NOW)
    assert fixed.status.to_api()["conditions"][0]["status"] == "True"
    assert [n.reason for n in fixed.notices] == ["Valid"]


POLICY_FILE = """
apiVersion: paddock.dev/v1alpha1
kind: SandboxPolicy
metadata: {name: careful}
spec:
  commands:
    allow: ["ls*", "git status*"]
    ask: ["git commit*"]
    deny: ["curl*"]
    default: deny
"""


@pytest.mark.parametrize(
    ("command", "code", "first_word"),
    [
        (["ls", "-la"], 0, "allow"),
        (["git status && curl x"], 1, "deny"),
        (["git", "commit", "-m", "x"], 3, "ask"),
        (["echo", "hi"], 1, "deny"),
    ],
)
def test_policy_check_exit_codes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    code: int,
    first_word: str,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_FILE)
    assert main(["policy", "check", "-f", str(path), "--", *command]) == code
    assert capsys.readouterr().out.split()[0] == f"{first_word}:"


def test_policy_check_json_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_FILE)
    assert main(["policy", "check", "-f", str(path), "--json", "--", "ls | curl x"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "deny"
    assert [(p["text"], p["decision"], p["rule"]) for p in result["parts"]] == [
        ("ls", "allow", "allow: ls*"),
        ("curl x", "deny", "deny: curl*"),
    ]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ls\n\ngit commit -m x\n")))
    assert main(["policy", "check", "-f", str(path), "--stdin", "--json"]) == 3
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["verdict"] for line in lines] == ["allow", "ask"]


def test_policy_check_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_FILE)
    assert main(["policy", "check", "-f", str(path)]) == 2
    assert main(["policy", "check", "-f", str(tmp_path / "missing.yaml"), "--", "ls"]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: SandboxPolicy\nspec: {commands: {default: maybe}}\n")
    assert main(["policy", "check", "-f", str(bad), "--", "ls"]) == 2
    assert "invalid" in capsys.readouterr().err


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_examples_policy_allows_the_examples_setup_and_command() -> None:
    """`kubectl apply -k examples/` gets a Ready sandbox and a run that Succeeds."""
    import yaml

    def spec(name: str) -> Any:
        return yaml.safe_load((EXAMPLES / name).read_text())["spec"]

    policy = SandboxPolicySpec.model_validate(spec("sandboxpolicy.yaml"))
    workspace = WorkspaceSpec.model_validate(spec("workspace.yaml"))
    assert [j.where for j in judge_setup(policy, workspace) if j.decision != Decision.ALLOW] == []
    command = spec("agentrun-command.yaml")["command"]
    assert judge_command(policy, command, workspace.scripts).decision == Decision.ALLOW
    assert problems(policy) == []


def test_sandboxes_are_found_by_what_they_are_made_from() -> None:
    from paddock.handlers.references import References, references_of

    index = References()
    named = ("team", "sbx")
    made_from = references_of(sandbox_body(), None)
    baseline = ("NetworkPolicy", "team", "paddock-baseline")
    careful = ("NetworkPolicy", "team", "careful.paddock-policy")
    assert made_from == {
        ("Workspace", "team", "ws"),
        ("SandboxPolicy", "team", "careful"),
        baseline,
        careful,
    }
    assert index.update(named, made_from) == []
    index.update(
        ("team", "other"),
        references_of(sandbox_body({"workspaceRef": {"name": "ws"}}), "platform/base"),
    )
    assert index.sandboxes(("Workspace", "team", "ws")) == [("team", "other"), ("team", "sbx")]
    assert index.sandboxes(("SandboxPolicy", "platform", "base")) == [("team", "other")]
    assert index.sandboxes(baseline) == [("team", "other"), ("team", "sbx")]
    # Moved to no policy: its policy and that policy's fence are no sandbox's any more.
    unused = index.update(
        named, references_of(sandbox_body({"workspaceRef": {"name": "ws2"}}), None)
    )
    assert unused == [careful, ("SandboxPolicy", "team", "careful")]
    assert index.sandboxes(("NetworkPolicy", "team", "paddock-no-policy")) == [named]
    unused = index.forget(("team", "other"))
    assert unused == [
        ("NetworkPolicy", "team", "base.platform.paddock-default"),
        ("SandboxPolicy", "platform", "base"),
        ("Workspace", "team", "ws"),
    ]
    assert index.sandboxes(("Workspace", "team", "ws")) == []
    assert index.sandboxes(("Workspace", "team", "ws2")) == [named]
    assert references_of(sandbox_body({"workspaceRef": {}}), None) == set()  # invalid spec
