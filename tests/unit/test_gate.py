"""Paddock's gate for a harness's shell commands: the gate script run by a real bash as a
hook runs it (a request in, an exit code out), and the operator's answers from the policy."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from paddock.agentruns import gating
from paddock.api.agentrun import AgentRunSpec
from paddock.api.common import SecretEnvVar
from paddock.api.policy import SandboxPolicySpec
from paddock.harness import claude_code, codex, gemini, opencode
from paddock.harness.base import Request, RequestKind
from paddock.render import run_scripts as rs
from paddock.runs import events as ev
from support.waiting import wait_for

NONCE = "7e" * 32
POLICY = SandboxPolicySpec.model_validate(
    {
        "commands": {
            "allow": ["echo *", "ls", "ls *"],
            "ask": ["git push *"],
            "deny": ["rm *"],
            "default": "deny",
        }
    }
)


def request(command: str, tool: str = "Bash") -> bytes:
    """A PreToolUse request as Claude Code writes it to its hook's stdin."""
    return json.dumps({"hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": {"command": command}}).encode()  # fmt: skip


NOBODY_ASKED = gating.Asking([], {}, datetime(2026, 12, 1, tzinfo=UTC), timedelta(minutes=15))


def answered(command: str) -> gating.Answered:
    return gating.answer(
        {"1-1": request(command)}, POLICY, {}, claude_code.request_of, NOBODY_ASKED
    )


@pytest.mark.parametrize(
    "command",
    ["echo hello", "ls -la && echo done", "echo $(ls)"],
)
def test_an_allowed_command_is_answered_allow_and_logs_nothing(command: str) -> None:
    result = answered(command)
    assert result.answers == {"1-1": "allow\n"}
    assert result.drafts == []


@pytest.mark.parametrize(
    ("command", "part"),
    [
        ("rm -rf build", "rm -rf build"),
        ("echo ok && rm -rf build", "rm -rf build"),
        ('sh -c "rm -rf build"', "rm -rf build"),
        ("eval 'rm -rf build'", "rm -rf build"),
        ("curl https://example.com", "curl https://example.com"),  # the default
    ],
)
def test_a_denied_command_is_refused_naming_the_part_and_rule(command: str, part: str) -> None:
    result = answered(command)
    verdict, _, message = result.answers["1-1"].partition("\n")
    assert verdict == "deny"
    assert "Paddock policy" in message
    assert part in message
    (event,) = result.drafts
    assert event.type == ev.POLICY_DENIED
    assert event.data["command"] == command
    assert event.data["part"] == part
    assert event.data["decision"] == "deny"
    assert event.data["rule"]


@pytest.mark.parametrize("raw", [b"not json", b"[]", request("ls", tool="Write")])
def test_a_request_the_gate_cannot_read_is_refused(raw: bytes) -> None:
    result = gating.answer({"1-1": raw}, POLICY, {}, claude_code.request_of, NOBODY_ASKED)
    assert result.answers["1-1"].startswith("deny\n")
    assert result.drafts[0].data["reason"] == "Unreadable"


# -- the script, as a hook runs it -------------------------------------------------------------

HOOK = """printf '%s' REQUEST | bash "$PADDOCK_RUN/gate" 2> "$PADDOCK_RUN/hook.err"
echo "gate exited $?"
"""


class Run:
    def __init__(self, tmp_path: Path, gate_seconds: int = 60) -> None:
        self.workspace = tmp_path / "workspace"
        self.workspace.mkdir()
        self.run_dir = tmp_path / "run"
        self.env = {
            **os.environ,
            "PADDOCK_WORKSPACE": str(self.workspace),
            "PADDOCK_RUN_DIR": str(self.run_dir),
            "PADDOCK_FILE_POLL_SECONDS": "0.1",
        }
        self.gate_seconds = gate_seconds

    def start(self, command: str) -> None:
        script = HOOK.replace("REQUEST", _quote(request(command).decode()))
        env = {"PADDOCK_GATE_SECONDS": str(self.gate_seconds)}
        payload = rs.launch_payload(NONCE, env, script, "", {"gate": rs.GATE})
        subprocess.run(rs.launch_argv("r1"), input=payload, text=True, env=self.env,
                       capture_output=True, check=True, timeout=30)  # fmt: skip

    def poll(self) -> rs.Poll:
        done = subprocess.run(rs.poll_argv("r1", 0, 0, 1 << 20), capture_output=True,
                              text=True, env=self.env, check=True, timeout=30)  # fmt: skip
        return rs.parse_poll(done.stdout)

    def answer(self, answers: dict[str, str], payload: str | None = None) -> None:
        """As the operator's exec does: the payload written, stdin left open."""
        answering = subprocess.Popen(rs.answer_argv("r1"), stdin=subprocess.PIPE, text=True,
                                     env=self.env)  # fmt: skip
        assert answering.stdin is not None
        answering.stdin.write(rs.answer_payload(answers) if payload is None else payload)
        answering.stdin.flush()
        try:
            assert answering.wait(timeout=30) == 0
        finally:
            answering.stdin.close()

    def outcome(self) -> tuple[str, str]:
        poll = wait_for(lambda: (p := self.poll()).completion and p, 30, what="the hook")
        err = (self.run_dir / "r1" / "hook.err").read_text()
        return poll.stdout.decode().strip(), err


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_the_gate_waits_for_the_answer_and_runs_only_on_allow(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.start("echo hi")
    requests = wait_for(lambda: run.poll().gate_requests, 30, what="the gate's request")
    ((request_id, raw),) = requests.items()
    assert json.loads(raw)["tool_input"]["command"] == "echo hi"
    run.answer({request_id: "allow\n"})
    assert run.outcome() == ("gate exited 0", "")


def test_a_denial_blocks_with_the_message_on_stderr(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.start("rm -rf /")
    requests = wait_for(lambda: run.poll().gate_requests, 30, what="the gate's request")
    run.answer(dict.fromkeys(requests, "deny\nPaddock policy: no.\n"))
    assert run.outcome() == ("gate exited 2", "Paddock policy: no.\n")
    assert run.poll().gate_requests == {}  # answered requests are not sent again


def test_no_answer_in_time_is_a_refusal(tmp_path: Path) -> None:
    run = Run(tmp_path, gate_seconds=1)
    run.start("echo hi")
    out, err = run.outcome()
    assert out == "gate exited 2"
    assert "no decision in time" in err


def test_an_answer_for_an_id_the_gate_did_not_make_is_not_written(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.start("echo hi")
    requests = wait_for(lambda: run.poll().gate_requests, 30, what="the gate's request")
    payload = "../../escape YWxsb3cK\n" + rs.answer_payload(dict.fromkeys(requests, "allow\n"))
    payload += "9-9 YWxsb3cK\n"  # after the end line: not read
    run.answer({}, payload)
    assert run.outcome()[0] == "gate exited 0"
    assert not (tmp_path / "escape.ans").exists()
    assert rs.answer_payload({"../x": "allow\n"}) == "end -\n"


def test_the_gate_refuses_when_it_cannot_work(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.write_text(rs.GATE)
    env = {k: v for k, v in os.environ.items() if k != "PADDOCK_RUN"}
    done = subprocess.run(["bash", str(gate)], input=request("echo hi"), env=env,
                          capture_output=True, timeout=30)  # fmt: skip
    assert done.returncode == 2


# -- each harness's side of it -----------------------------------------------------------------


def _spec(harness: str, env: dict[str, str] | None = None) -> AgentRunSpec:
    variables = [{"name": k, "value": v} for k, v in (env or {}).items()]
    fields = {"sandboxRef": {"name": "box"}, "harness": harness, "prompt": "p", "env": variables}
    return AgentRunSpec.model_validate(fields)


def test_claude_code_runs_the_gate_from_its_own_settings_only() -> None:
    invocation = claude_code.gated(_spec("claude-code"), POLICY)
    assert (
        '--setting-sources= --settings "$PADDOCK_RUN/claude-settings.json" --strict-mcp-config'
        in invocation.script
    )
    settings = json.loads(invocation.files["claude-settings.json"])
    (entry,) = settings["hooks"]["PreToolUse"]
    assert entry["matcher"] == "Bash"
    assert entry["hooks"][0]["timeout"] > int(invocation.env["PADDOCK_GATE_SECONDS"])
    assert invocation.files["gate"] == rs.GATE
    assert settings["permissions"]["allow"][0] == "Bash"


def test_opencode_gets_the_plugin_merged_into_the_runs_own_config() -> None:
    provider = {"anthropic": {"options": {"baseURL": "http://127.0.0.1:1/v1"}}}
    own = json.dumps({"provider": provider, "plugin": ["theirs"], "permission": {"bash": "deny"}})
    invocation = opencode.gated(_spec("opencode", {"OPENCODE_CONFIG_CONTENT": own}), POLICY)
    config = json.loads(invocation.files[opencode.CONFIG])
    assert config["provider"] == provider
    assert config["plugin"] == ["theirs", f"file://{opencode.RUN_MARK}/{opencode.PLUGIN}"]
    assert config["permission"] == opencode.permissions(POLICY)
    assert config["permission"]["edit"] == "allow"
    assert invocation.env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert "throw new Error" in invocation.files[opencode.PLUGIN]
    broken = opencode.gated(_spec("opencode", {"OPENCODE_CONFIG_CONTENT": "{oops"}), POLICY)
    assert json.loads(broken.files[opencode.CONFIG])["plugin"]


def test_opencode_config_gets_the_run_directory_in_the_sandbox(tmp_path: Path) -> None:
    invocation = opencode.gated(_spec("opencode"), POLICY)
    run = tmp_path / "run dir"
    run.mkdir()
    (run / opencode.CONFIG).write_text(invocation.files[opencode.CONFIG])
    # The script up to its exec, then the variable it exports.
    lines = [*invocation.script.splitlines()[:-1], 'printf %s "$OPENCODE_CONFIG_CONTENT"']
    env = {**os.environ, "PADDOCK_RUN": str(run)}
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines)], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout)["plugin"] == [f"file://{run}/{opencode.PLUGIN}"]


COMMAND, WRITE, FETCH = RequestKind.COMMAND, RequestKind.FILE_WRITE, RequestKind.NETWORK


@pytest.mark.parametrize(
    ("request_body", "asked"),
    [
        ({"tool": "bash", "args": {"command": "ls"}}, Request(COMMAND, "ls")),
        ({"tool": "write", "args": {"filePath": "/w/a"}}, Request(WRITE, "/w/a")),
        ({"tool": "webfetch", "args": {"url": "https://x"}}, Request(FETCH, "https://x")),
        ({"tool": "edit", "args": {"command": "ls"}}, None),
        ({"tool": "bash", "args": "ls"}, None),
        ({"tool": "read", "args": {"filePath": "/w/a"}}, None),
    ],
)
def test_what_opencode_asks_about(request_body: dict[str, object], asked: Request | None) -> None:
    assert opencode.request_of(request_body) == asked


@pytest.mark.parametrize(
    ("request_body", "asked"),
    [
        ({"tool_name": "Bash", "tool_input": {"command": "ls"}}, Request(COMMAND, "ls")),
        ({"tool_name": "Write", "tool_input": {"file_path": "/w/a"}}, Request(WRITE, "/w/a")),
        (
            {"tool_name": "WebFetch", "tool_input": {"url": "https://x"}},
            Request(FETCH, "https://x"),
        ),
        ({"tool_name": "Read", "tool_input": {"file_path": "/w/a"}}, None),
        ({"tool_name": "Bash", "tool_input": {"cmd": "ls"}}, None),
    ],
)
def test_what_claude_code_asks_about(
    request_body: dict[str, object], asked: Request | None
) -> None:
    assert claude_code.request_of(request_body) == asked


@pytest.mark.parametrize(
    ("request_body", "asked"),
    [
        ({"tool_name": "run_shell_command", "tool_input": {"command": "l"}}, Request(COMMAND, "l")),
        ({"tool_name": "write_file", "tool_input": {"file_path": "/w/a"}}, Request(WRITE, "/w/a")),
        ({"tool_name": "replace", "tool_input": {"file_path": "/w/a"}}, Request(WRITE, "/w/a")),
        ({"tool_name": "read_file", "tool_input": {"file_path": "/w/a"}}, None),
    ],
)  # fmt: skip
def test_what_gemini_asks_about(request_body: dict[str, object], asked: Request | None) -> None:
    assert gemini.request_of(request_body) == asked


def test_gemini_gets_the_hook_in_user_settings_and_the_policy_as_admin_rules() -> None:
    spec = _spec("gemini")
    spec = spec.model_copy(update={"secrets": [SecretEnvVar.model_validate(
        {"name": "GEMINI_API_KEY", "secretKeyRef": {"name": "llm", "key": "key"}})]})  # fmt: skip
    asks = SandboxPolicySpec.model_validate(
        {"capabilities": {"fileWrite": "ask", "network": "deny"}}
    )
    invocation = gemini.gated(spec, asks)
    settings = json.loads(invocation.files[gemini.SETTINGS])
    (entry,) = settings["hooks"]["BeforeTool"]
    assert entry["matcher"] == "run_shell_command|write_file|replace"
    assert entry["hooks"][0]["timeout"] > int(invocation.env["PADDOCK_GATE_SECONDS"]) * 1000
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert invocation.env["GEMINI_CLI_TRUST_WORKSPACE"] == "false"
    rules = invocation.files[gemini.POLICY_FILE]
    assert 'toolName = "run_shell_command"\ndecision = "allow"' in rules
    assert 'toolName = "write_file"\ndecision = "allow"' in rules  # the gate asks
    assert 'toolName = "web_fetch"\ndecision = "deny"' in rules
    assert "--admin-policy" in invocation.script


def test_codex_gets_the_hook_as_a_session_flag_naming_the_run_directory(tmp_path: Path) -> None:
    spec = _spec("codex")
    invocation = codex.gated(spec, POLICY)
    argv_line = invocation.script.split(" < ")[0].removeprefix("exec ")
    shown = subprocess.run(
        ["bash", "-c", f'for word in {argv_line}; do printf "%s\\n" "$word"; done'],
        env={**os.environ, "PADDOCK_RUN": str(tmp_path), "PADDOCK_WORKSPACE": "/w"},
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert "--dangerously-bypass-hook-trust" in shown
    (hook,) = [word for word in shown if word.startswith("hooks.PreToolUse=")]
    assert f'matcher="^Bash$", hooks=[{{type="command", command="bash {tmp_path}/gate"}}]' in hook
    assert 'sandbox_mode="workspace-write"' in shown  # fileWrite allow (the default)
    read_only = SandboxPolicySpec.model_validate({"capabilities": {"fileWrite": "deny"}})
    assert 'sandbox_mode="read-only"' in codex.gated(spec, read_only).script


@pytest.mark.parametrize(
    ("request_body", "asked"),
    [
        ({"tool_name": "Bash", "tool_input": {"command": "ls"}}, Request(COMMAND, "ls")),
        ({"tool_name": "apply_patch", "tool_input": {"command": "x"}}, None),
    ],
)
def test_what_codex_asks_about(request_body: dict[str, object], asked: Request | None) -> None:
    assert codex.request_of(request_body) == asked
