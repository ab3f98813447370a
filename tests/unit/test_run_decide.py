"""The AgentRun lifecycle as tables: which sandbox a run uses and how it waits for it, when it
is cancelled or timed out, what each poll of its journal means, and how it ends
(docs/runs.md lists the same phases and reasons)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paddock.agentruns import decide, following
from paddock.agentruns import sandbox as sandboxes
from paddock.agentruns.decide import Ending, Wait
from paddock.agentruns.following import Progress
from paddock.agentruns.sandbox import ReadySandbox, Unusable, Verdict, Waiting
from paddock.api.agentrun import AgentRunSpec
from paddock.harness import HARNESSES
from paddock.render.run_scripts import Completion, Poll
from paddock.runs import events as ev
from paddock.runs.events import Draft, RunSummary, stamp

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
CREATED = datetime(2026, 1, 1, 0, 30, 0, tzinfo=UTC)
NONCE = "n" * 64
RUN = {
    "apiVersion": "paddock.dev/v1alpha1",
    "kind": "AgentRun",
    "metadata": {"name": "fix-bug", "namespace": "team", "uid": "0123456789abcdef"},
}
TEMPLATE = {"workspaceRef": {"name": "ws"}}


def spec(**fields: Any) -> AgentRunSpec:
    return AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "box"}, "harness": "command", "command": "make test"} | fields
    )


def template_spec(**fields: Any) -> AgentRunSpec:
    return AgentRunSpec.model_validate(
        {"sandboxTemplate": TEMPLATE, "harness": "command", "command": "make"} | fields
    )


def sandbox(phase: str | None, *, paused: bool = False, message: str = "") -> Obj:
    status: Obj = {"phase": phase, "podName": "box-pod", "message": message} if phase else {}
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": "box", "namespace": "team"},
        "spec": {"workspaceRef": {"name": "ws"}, "lifecycle": {"paused": paused}},
        "status": status,
    }


# -- which sandbox --------------------------------------------------------------------------

JUDGED = {
    "not found": (None, Waiting, "SandboxNotFound", False),
    "not ready yet": (sandbox("SettingUp"), Waiting, "SandboxNotReady", False),
    "no status yet": (sandbox(None), Waiting, "SandboxNotReady", False),
    "paused by its spec": (sandbox("Paused", paused=True), Waiting, "SandboxPaused", False),
    "paused for being idle": (sandbox("Paused"), Waiting, "SandboxResuming", True),
    "failed": (sandbox("Failed", message="clone failed"), Unusable, "SandboxFailed", False),
    "invalid": (
        {**sandbox("Ready"), "spec": {"workspaceRef": {"name": "ws"}, "image": 3}},
        Waiting,
        "SandboxInvalid",
        False,
    ),
    "ready": (sandbox("Ready"), ReadySandbox, None, False),
}


@pytest.mark.parametrize("case", JUDGED)
def test_the_sandbox_verdict_table(case: str) -> None:
    found, state_type, reason, touch = JUDGED[case]
    verdict = sandboxes.judge(RUN, spec(), "box", found, "")
    assert isinstance(verdict.state, state_type)
    assert getattr(verdict.state, "reason", None) == reason
    assert verdict.touch is touch
    assert verdict.create is None


def test_a_run_against_a_paused_sandbox_waits_without_touching_it() -> None:
    verdict = sandboxes.judge(RUN, spec(), "box", sandbox("Paused", paused=True), "")
    assert verdict == Verdict(
        Waiting("box", "SandboxPaused", "Sandbox box is paused (spec.lifecycle.paused)")
    )


def test_a_run_of_its_own_refuses_a_sandbox_it_did_not_make() -> None:
    run_spec = template_spec()
    squatted = {**sandbox("Ready"), "metadata": {"name": "fix-bug-01234567", "uid": "x"}}
    verdict = sandboxes.judge(RUN, run_spec, "fix-bug-01234567", squatted, "")
    assert isinstance(verdict.state, Unusable)
    assert verdict.state.reason == "NameConflict"


def test_a_thread_refuses_a_sandbox_without_its_key() -> None:
    run_spec = template_spec(threadId="t1")
    name = sandboxes.sandbox_name(RUN, run_spec, "hash-a")
    assert isinstance(name, str)
    planted = {**sandbox("Ready"), "metadata": {"name": name, "labels": {}}}
    verdict = sandboxes.judge(RUN, run_spec, name, planted, "hash-a")
    assert isinstance(verdict.state, Unusable)
    assert verdict.state.reason == "NameConflict"


@pytest.mark.parametrize(
    ("change", "usable"),
    [
        ({}, True),
        ({"lifecycle": {"paused": True}}, True),  # a person's to set
        ({"policyRef": {"name": "looser"}}, False),
        ({"image": "someone-elses:latest"}, False),
        ({"lifecycle": {"idleTimeout": "99h"}}, False),
    ],
)
def test_a_thread_uses_a_sandbox_with_its_key_only_when_its_spec_is_the_template(
    change: dict[str, Any], usable: bool
) -> None:
    """Labels are anyone's to write who may create a Sandbox: a sandbox made or changed by
    someone else under the thread's name and key is refused by its spec."""
    run_spec = template_spec(threadId="t1")
    name = sandboxes.sandbox_name(RUN, run_spec, "hash-a")
    assert isinstance(name, str)
    made = sandboxes.template_sandbox(RUN, run_spec, name, "hash-a")
    found = {**sandbox("Ready"), "metadata": made["metadata"], "spec": made["spec"] | change}
    verdict = sandboxes.judge(RUN, run_spec, name, found, "hash-a")
    if usable:
        assert isinstance(verdict.state, ReadySandbox)
    else:
        assert isinstance(verdict.state, Unusable)
        assert verdict.state.reason == "NameConflict"
        assert "not the run's sandboxTemplate" in verdict.state.message


def test_a_run_execs_only_into_the_pod_its_sandbox_controls() -> None:
    ready = ReadySandbox("box", "box-pod", "ws", "sandbox-uid")
    own = {"metadata": {"ownerReferences": [{"uid": "sandbox-uid", "controller": True}]}}
    other = {"metadata": {"ownerReferences": [{"uid": "someone", "controller": True}]}}
    assert sandboxes.check_pod(ready, own) == ready
    taken = sandboxes.check_pod(ready, other)
    assert isinstance(taken, Unusable)
    assert taken.reason == "NameConflict"
    gone = sandboxes.check_pod(ready, None)
    assert isinstance(gone, Waiting)
    assert gone.reason == "SandboxNotReady"
    # A pod being deleted (a pause, a replacement) still says Ready until it stops.
    ending = {"metadata": {**own["metadata"], "deletionTimestamp": "2026-12-07T00:00:00Z"}}
    going = sandboxes.check_pod(ready, ending)
    assert isinstance(going, Waiting)
    assert going.reason == "SandboxNotReady"


def test_a_ready_sandbox_names_its_pod_and_workspace() -> None:
    ready = {**sandbox("Ready"), "metadata": {"name": "box", "uid": "sandbox-uid"}}
    verdict = sandboxes.judge(RUN, spec(), "box", ready, "")
    assert verdict.state == ReadySandbox("box", "box-pod", "ws", "sandbox-uid")


def test_a_run_of_its_own_creates_a_sandbox_it_controls() -> None:
    run_spec = template_spec()
    name = sandboxes.sandbox_name(RUN, run_spec, None)
    assert name == "fix-bug-01234567"
    verdict = sandboxes.judge(RUN, run_spec, name, None, "")
    assert isinstance(verdict.state, Waiting)
    assert verdict.state.reason == "SandboxCreated"
    assert verdict.create is not None
    (owner,) = verdict.create["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "AgentRun",
        RUN["metadata"]["uid"],
        True,
    )
    assert verdict.create["spec"]["workspaceRef"] == {"name": "ws"}


def test_a_thread_finds_one_sandbox_per_workspace_hash() -> None:
    run_spec = template_spec(threadId="t1")
    waiting = sandboxes.sandbox_name(RUN, run_spec, None)
    assert isinstance(waiting, Waiting)
    assert waiting.reason == "WorkspaceNotReady"
    first = sandboxes.sandbox_name(RUN, run_spec, "hash-a")
    again = sandboxes.sandbox_name(
        {**RUN, "metadata": {**RUN["metadata"], "uid": "x"}}, run_spec, "hash-a"
    )
    changed = sandboxes.sandbox_name(RUN, run_spec, "hash-b")
    assert first == again != changed
    assert isinstance(first, str)
    verdict = sandboxes.judge(RUN, run_spec, first, None, "hash-a")
    assert verdict.create is not None
    assert "ownerReferences" not in verdict.create["metadata"]  # it outlives the run
    assert verdict.create["metadata"]["labels"]["paddock.dev/thread-key"] == first.removeprefix(
        "thread-"
    )


TEMPLATE_CHANGES = {
    "runtimeClassName": {"runtimeClassName": "gvisor"},
    "resources": {"resources": {"limits": {"cpu": "2"}}},
    "storage": {"storage": {"size": "20Gi"}},
    "nodeSelector": {"nodeSelector": {"disk": "ssd"}},
    "lifecycle": {"lifecycle": {"idleTimeout": "1h"}},
    "image": {"image": "python:3.12"},
}


@pytest.mark.parametrize("field", TEMPLATE_CHANGES)
def test_a_changed_template_moves_the_thread_and_the_run_says_what_changed(field: str) -> None:
    """Every field of the template is in the thread's key: a change moves the thread to a new
    sandbox, and the run's wait names the old sandbox and the field."""
    old_spec = template_spec(threadId="t1")
    new_spec = template_spec(threadId="t1", sandboxTemplate={
        **old_spec.sandbox_template.to_api(), **TEMPLATE_CHANGES[field]})  # fmt: skip
    old_name = sandboxes.sandbox_name(RUN, old_spec, "hash-a")
    new_name = sandboxes.sandbox_name(RUN, new_spec, "hash-a")
    assert isinstance(old_name, str)
    assert isinstance(new_name, str)
    assert old_name != new_name
    made = sandboxes.judge(RUN, old_spec, old_name, None, "hash-a").create
    assert made is not None
    made["metadata"]["creationTimestamp"] = "2026-12-07T10:00:00Z"
    other_thread = sandboxes.judge(RUN, template_spec(threadId="t2"), "x", None, "hash-a").create
    before = sandboxes.moved_from("team", new_spec, new_name, [made, other_thread])
    assert before is made
    verdict = sandboxes.judge(RUN, new_spec, new_name, None, "hash-a", before)
    assert isinstance(verdict.state, Waiting)
    assert verdict.state.reason == "ThreadMoved"
    assert f"({field})" in verdict.state.message
    assert f"from Sandbox {old_name}" in verdict.state.message
    assert verdict.create is not None
    assert sandboxes.moved_from("team", old_spec, old_name, [made]) is None  # its own


def test_a_changed_workspace_moves_the_thread_and_the_run_says_so() -> None:
    run_spec = template_spec(threadId="t1")
    made = sandboxes.judge(RUN, run_spec, "thread-a", None, "hash-a").create
    assert made is not None
    made["status"] = {"workspaceHash": "hash-a"}
    verdict = sandboxes.judge(RUN, run_spec, "thread-b", None, "hash-b", made)
    assert isinstance(verdict.state, Waiting)
    assert "(the Workspace)" in verdict.state.message


# -- before the harness starts --------------------------------------------------------------

BEFORE = {
    "a Secret is missing": (["keys/anthropic"], None, Wait, "Pending", "SecretNotFound"),
    "the sandbox is not found": (
        [],
        Verdict(Waiting("box", "SandboxNotFound", "not found")),
        Wait,
        "WaitingForSandbox",
        "SandboxNotFound",
    ),
    "the sandbox is paused": (
        [],
        Verdict(Waiting("box", "SandboxPaused", "paused")),
        Wait,
        "WaitingForSandbox",
        "SandboxPaused",
    ),
    "the sandbox failed": (
        [],
        Verdict(Unusable("box", "SandboxFailed", "failed")),
        Ending,
        "Failed",
        "SandboxFailed",
    ),
    "the sandbox is ready": ([], Verdict(ReadySandbox("box", "p", "ws")), ReadySandbox, None, None),
}


@pytest.mark.parametrize("case", BEFORE)
def test_the_before_launch_table(case: str) -> None:
    missing, verdict, outcome_type, phase, reason = BEFORE[case]
    outcome = decide.before_launch("team", missing, None, verdict)
    assert isinstance(outcome, outcome_type)
    assert getattr(outcome, "phase", None) == phase
    assert getattr(outcome, "reason", None) == reason


def test_a_missing_prompt_configmap_waits_with_its_own_reason() -> None:
    outcome = decide.before_launch("team", [], "prompts/fix-bug", None)
    assert isinstance(outcome, Wait)
    assert (outcome.phase, outcome.condition, outcome.reason) == (
        "Pending",
        "PromptFound",
        "PromptNotFound",
    )
    assert "prompts/fix-bug" in outcome.message


def test_waiting_for_a_secret_is_the_secrets_condition_and_names_the_key() -> None:
    outcome = decide.before_launch("team", ["keys/anthropic"], None, None)
    assert isinstance(outcome, Wait)
    assert outcome.condition == "SecretsFound"
    assert "keys/anthropic" in outcome.message


ABORTS = {
    "running within its timeout": (spec(), None),
    "cancelled": (spec(cancel=True), ("Cancelled", "cancelled: spec.cancel is true")),
    "past its timeout": (
        spec(timeout="10m"),
        ("TimedOut", "timed out: the run took longer than its timeout of 10m"),
    ),
}


@pytest.mark.parametrize("case", ABORTS)
def test_the_abort_table(case: str) -> None:
    run_spec, expected = ABORTS[case]
    ending = decide.abort(run_spec, CREATED, NOW)
    assert (None if ending is None else (ending.phase, ending.message)) == expected


def test_the_kill_follows_the_term_after_the_grace() -> None:
    signalled: dict[str, datetime] = {}
    assert following.signal_to_send(signalled, NOW) == "TERM"
    signalled["TERM"] = NOW
    assert following.signal_to_send(signalled, NOW + timedelta(seconds=9)) is None
    assert following.signal_to_send(signalled, NOW + timedelta(seconds=10)) == "KILL"
    signalled["KILL"] = NOW + timedelta(seconds=10)
    assert following.signal_to_send(signalled, NOW + timedelta(seconds=60)) is None


# -- while it runs and how it ends ----------------------------------------------------------


def summary_of(*drafts: Draft) -> RunSummary:
    summary = RunSummary()
    summary.add_all(stamp(d, i, NOW) for i, d in enumerate(drafts))
    return summary


def follow(
    poll: Poll,
    run_spec: AgentRunSpec | None = None,
    *,
    summary: RunSummary | None = None,
    gone: int = 0,
    abort: Ending | None = None,
) -> following.Followed:
    run_spec = run_spec or spec()
    progress = Progress("box-pod", {}, summary or RunSummary(), decide.digest(NONCE), gone)
    parse = HARNESSES[run_spec.harness].parse_line
    return following.follow(run_spec, poll, parse, progress, abort)


def done(code: int, nonce: str = NONCE, **fields: Any) -> Poll:
    return Poll(completion=Completion(code, nonce), **fields)


FOLLOWED = {
    "output, still running": (Poll(wrapper_alive=True, stdout=b"hello\n"), None, None),
    "the run directory is gone": (Poll(missing=True), "Failed", "SandboxLost"),
    "exit 0": (done(0, stdout=b"ok\n"), "Succeeded", "Succeeded"),
    "exit 2": (done(2, stderr_tail="warning\nmake: *** [test] Error 2\n"), "Failed", "Failed"),
    "a forged record": (done(0, nonce="f" * 64, wrapper_alive=True), None, None),
    "the wrapper gone once": (Poll(wrapper_alive=False), None, None),
    "the wrapper gone twice": (Poll(wrapper_alive=False), "Failed", "WrapperLost"),
}


@pytest.mark.parametrize("case", FOLLOWED)
def test_the_follow_table(case: str) -> None:
    poll, phase, reason = FOLLOWED[case]
    followed = follow(poll, gone=1 if case == "the wrapper gone twice" else 0)
    ending = followed.ending
    assert (ending.phase if ending else None, ending.reason if ending else None) == (phase, reason)


def test_output_becomes_events_and_moves_the_cursor() -> None:
    followed = follow(Poll(wrapper_alive=True, stdout=b"one\ntwo\npart"))
    assert [d.summary for d in followed.drafts] == ["one", "two"]
    assert followed.cursor["stdout"] == len(b"one\ntwo\n")  # the partial line waits


def test_a_full_poll_is_read_again_at_once_before_the_end_is_taken() -> None:
    big = b"x\n" * (300 * 1024 // 2)
    followed = follow(done(0, stdout=big))
    assert followed.poll_again_now
    assert followed.ending is None


def test_a_forged_record_is_noted_once_and_never_ends_the_run() -> None:
    first = follow(done(0, nonce="f" * 64, wrapper_alive=True))
    assert [(d.type, d.data.get("reason")) for d in first.drafts] == [("error", "ForgedCompletion")]
    noted = summary_of(*first.drafts)
    again = follow(done(0, nonce="f" * 64, wrapper_alive=True), summary=noted)
    assert again.drafts == []
    assert again.ending is None


def test_a_live_wrapper_resets_the_count_of_polls_without_it() -> None:
    assert follow(Poll(wrapper_alive=True), gone=1).wrapper_gone_polls == 0
    assert follow(Poll(wrapper_alive=False), gone=0).wrapper_gone_polls == 1


def test_a_failed_command_says_its_last_stderr_line() -> None:
    ending = follow(done(2, stderr_tail="warning\nmake: *** [test] Error 2\n")).ending
    assert ending is not None
    assert ending.message == "command exited with code 2: make: *** [test] Error 2"
    assert ending.exit_code == 2


def test_a_failed_agent_says_its_own_error_before_its_stderr() -> None:
    agent = spec(harness="claude-code", command=None, prompt="fix it")
    summary = summary_of(Draft(ev.ERROR, "API Error: rate limited", {"message": "rate limited"}))
    ending = follow(done(1, stderr_tail="some warning\n"), agent, summary=summary).ending
    assert ending is not None
    assert ending.message == "claude-code exited with code 1: API Error: rate limited"


def test_an_agents_error_in_its_last_output_is_the_reason_it_failed() -> None:
    agent = spec(harness="codex", command=None, prompt="fix it")
    summary = summary_of(Draft(ev.ERROR, "WARNING: proceeding without PATH aliases", {}))
    last = (
        b'{"type":"turn.started"}\n{"type":"item.completed","item":{"type":"agent_message",'
        b'"text":"trying"}}\n{"type":"error","message":"unexpected status 401 Unauthorized"}\n'
    )
    ending = follow(done(1, stdout=last), agent, summary=summary).ending
    assert ending is not None
    assert ending.message == "codex exited with code 1: unexpected status 401 Unauthorized"


def test_an_error_result_fails_the_run_even_with_exit_0() -> None:
    agent = spec(harness="claude-code", command=None, prompt="fix it")
    summary = summary_of(Draft(ev.RESULT, "", {"isError": True, "text": "max turns"}))
    ending = follow(done(0), agent, summary=summary).ending
    assert ending is not None
    assert (ending.phase, ending.message) == ("Failed", "claude-code exited with code 0: max turns")


def test_a_cancelled_run_ends_cancelled_when_its_harness_exits() -> None:
    cancel = decide.abort(spec(cancel=True), CREATED, NOW)
    ending = follow(done(143), abort=cancel).ending
    assert ending is not None
    assert (ending.phase, ending.exit_code) == ("Cancelled", 143)


def test_changed_files_are_an_event_before_the_end() -> None:
    ending = follow(done(0, changes=" M src/app.py\n?? notes.md\n", diff="diff --git")).ending
    assert ending is not None
    (changed,) = ending.drafts
    assert changed.type == ev.FILE_CHANGED
    assert changed.data["files"] == [
        {"path": "src/app.py", "status": "modified"},
        {"path": "notes.md", "status": "untracked"},
    ]


TERMINAL = {
    "Succeeded": (Ending("Succeeded", "Succeeded", "done", 0), ev.RUN_COMPLETED, None),
    "Failed": (Ending("Failed", "Failed", "exit 1", 1), ev.RUN_FAILED, None),
    "LaunchFailed": (
        decide.launch_failure(spec(), "p", 1, "no bash"),
        ev.RUN_FAILED,
        "LaunchFailed",
    ),
    "SandboxLost": (decide.sandbox_lost("gone"), ev.RUN_FAILED, "SandboxLost"),
    "Cancelled": (Ending("Cancelled", "Cancelled", "cancelled"), ev.RUN_ABORTED, None),
    "TimedOut": (Ending("TimedOut", "TimedOut", "timed out"), ev.RUN_ABORTED, None),
}


@pytest.mark.parametrize("case", TERMINAL)
def test_the_terminal_event_table(case: str) -> None:
    ending, kind, reason = TERMINAL[case]
    event = decide.terminal_event(ending)
    assert event.type == kind
    assert event.data["phase"] == ending.phase
    assert event.data.get("reason") == reason


def test_the_result_comes_from_the_log_so_a_restart_writes_the_same() -> None:
    summary = summary_of(
        Draft(ev.RESULT, "", {"text": "Fixed the bug.", "isError": False}),
        decide.terminal_event(Ending("Succeeded", "Succeeded", "claude-code finished", 0)),
    )
    result = decide.final_result(summary)
    assert (result.exit_code, result.is_error, result.summary) == (0, False, "Fixed the bug.")


def test_a_completion_is_genuine_only_with_the_runs_own_nonce() -> None:
    assert decide.genuine(NONCE, decide.digest(NONCE))
    assert not decide.genuine("f" * 64, decide.digest(NONCE))
    assert not decide.genuine(NONCE, None)


# -- one run at a time ----------------------------------------------------------------------


def other_run(name: str, created: str, status: Obj, **fields: Any) -> Obj:
    run_spec = {"sandboxRef": {"name": "box"}, "harness": "command", "command": "x"} | fields
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": run_spec,
        "status": status,
    }


ME = {"metadata": {"name": "me", "uid": "uid-me", "creationTimestamp": "2026-01-01T00:00:10Z"}}
EARLIER, LATER = "2026-01-01T00:00:05Z", "2026-01-01T00:00:20Z"

BUSY = {
    "another run is running in it": (
        other_run("a", LATER, {"phase": "Running", "sandboxName": "box"}), "a"),
    "another waits for approval in it": (
        other_run("a", LATER, {"phase": "AwaitingApproval", "sandboxName": "box"}), "a"),
    "another is being launched (its nonce's digest is stored)": (
        other_run("a", LATER, {"phase": "Pending", "completionDigest": "d"}), "a"),
    "an earlier run waits for it too": (
        other_run("a", EARLIER, {"phase": "WaitingForSandbox"}), "a"),
    "an earlier run of the same sandbox, not yet stepped": (
        other_run("a", EARLIER, {}), None),
    "a later run waits for it too": (
        other_run("a", LATER, {"phase": "WaitingForSandbox"}), None),
    "an earlier run waits for its own Secrets": (
        other_run("a", EARLIER, {"phase": "Pending"}), None),
    "another run has ended": (
        other_run("a", EARLIER, {"phase": "Succeeded", "completionDigest": "d"}), None),
    "another run uses another sandbox": (
        other_run("a", EARLIER, {"phase": "Running"}, sandboxRef={"name": "other"}), None),
    "the run itself": (
        other_run("me", EARLIER, {"phase": "Running"}) | {"metadata": ME["metadata"]}, None),
}  # fmt: skip


@pytest.mark.parametrize(("other", "holder"), BUSY.values(), ids=BUSY.keys())
def test_a_run_waits_while_its_sandbox_is_busy(other: Obj, holder: str | None) -> None:
    waiting = sandboxes.busy(ME, spec(), "box", [other])
    if holder is None:
        assert waiting is None
        return
    assert waiting is not None
    assert (waiting.name, waiting.reason) == ("box", "SandboxBusy")
    assert f"AgentRun {holder} " in waiting.message


def test_a_run_of_a_thread_waits_for_another_run_of_it_in_any_sandbox() -> None:
    mine = template_spec(threadId="t-1")
    thread = {"sandboxTemplate": TEMPLATE, "threadId": "t-1"}
    running = {"phase": "Running", "sandboxName": "thread-old"}
    same = other_run("a", LATER, running, **thread)
    assert sandboxes.busy(ME, mine, "thread-new", [same]) is not None
    other_thread = other_run("a", LATER, running, **(thread | {"threadId": "t-2"}))
    assert sandboxes.busy(ME, mine, "thread-new", [other_thread]) is None
    not_reused = other_run("a", LATER, running, **(thread | {"reuse": "none"}))
    assert sandboxes.busy(ME, mine, "thread-new", [not_reused]) is None


def test_a_waiting_run_names_the_run_in_the_sandbox_and_counts_those_ahead_of_it() -> None:
    holder = other_run("b-holder", LATER, {"phase": "Running", "sandboxName": "box"})
    earlier = other_run("a-early", EARLIER, {"phase": "WaitingForSandbox"})
    waiting = sandboxes.busy(ME, spec(), "box", [earlier, holder])
    assert waiting is not None
    said = "AgentRun b-holder is running in it, and 1 run(s) created earlier wait for it too"
    assert said in waiting.message


@pytest.mark.parametrize("other", [o for o, _ in BUSY.values()], ids=BUSY.keys())
def test_what_the_operator_keeps_of_a_run_decides_the_line_as_the_run_does(other: Obj) -> None:
    full = other | {"kind": "AgentRun"}
    full["status"] = {**full["status"], "lastEvents": [{"seq": 0}], "message": "m"}
    kept = sandboxes.queue_view(full)
    assert "lastEvents" not in kept["status"]
    assert sandboxes.busy(ME, spec(), "box", [kept]) == sandboxes.busy(ME, spec(), "box", [full])
