"""Paddock's gate for a harness's shell commands: the operator's answers from the policy, and
how each harness's hook reaches the gate (the channel itself: test_gate_channel.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from paddock.agentruns import gating
from paddock.agentruns.asking import Answered, Asking, allowing
from paddock.api.agentrun import AgentRunSpec
from paddock.api.common import SecretEnvVar
from paddock.api.policy import SandboxPolicySpec
from paddock.harness import claude_code, codex, gemini, opencode
from paddock.harness.base import Request, RequestKind, gate_seconds, session
from paddock.render import gate_scripts
from paddock.runs import events as ev

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


NOBODY_ASKED = Asking([], {}, datetime(2026, 12, 1, tzinfo=UTC), timedelta(minutes=15))


def answered(command: str) -> Answered:
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


def test_a_command_with_a_byte_that_is_not_utf8_is_denied_alone() -> None:
    """The engine cannot raise on any text: one such request is denied, saying why, and the
    others of the same poll are answered as usual."""
    bad = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                      "tool_input": {"command": "ls \udcff"}}).encode()  # fmt: skip
    requests = {"1-1": bad, "1-2": request("ls -la"), "1-3": request("rm -rf x")}
    result = gating.answer(requests, POLICY, {}, claude_code.request_of, NOBODY_ASKED)
    assert result.answers["1-2"] == "allow\n"
    assert result.answers["1-3"].startswith("deny\n")
    verdict, _, message = result.answers["1-1"].partition("\n")
    assert verdict == "deny"
    assert "not UTF-8" in message
    assert all(json.dumps(draft.data, ensure_ascii=False).encode() for draft in result.drafts)


# -- each harness's side of it -----------------------------------------------------------------


def _spec(harness: str, env: dict[str, str] | None = None) -> AgentRunSpec:
    variables = [{"name": k, "value": v} for k, v in (env or {}).items()]
    fields = {"sandboxRef": {"name": "box"}, "harness": harness, "prompt": "p", "env": variables}
    return AgentRunSpec.model_validate(fields)


def test_claude_code_runs_the_gate_from_its_own_settings_only() -> None:
    spec = _spec("claude-code")
    invocation = claude_code.gated(spec, POLICY)
    assert invocation.gated
    assert (
        '--setting-sources= --settings "$PADDOCK_CONTROL/claude/settings.json" '
        "--strict-mcp-config" in invocation.script
    )
    settings = json.loads(invocation.files[claude_code.SETTINGS])
    (entry,) = settings["hooks"]["PreToolUse"]
    assert entry["matcher"] == "Bash"
    hook = entry["hooks"][0]
    assert hook["timeout"] > gate_seconds(spec)
    assert hook["command"].startswith('env -i PATH="$PATH" node "$PADDOCK_CONTROL/gate.mjs"')
    assert hook["command"].endswith("|| exit 2")  # a killed client blocks
    # Only the gate's answer allows Bash: a gate that dies leaves it refused.
    assert "Bash" not in settings["permissions"]["allow"]
    assert "Bash" not in settings["permissions"]["deny"]


def test_opencode_gets_the_plugin_merged_into_the_runs_own_config() -> None:
    provider = {"anthropic": {"options": {"baseURL": "http://127.0.0.1:1/v1"}}}
    own = json.dumps({"provider": provider, "plugin": ["theirs"], "permission": {"bash": "deny"}})
    invocation = opencode.gated(_spec("opencode", {"OPENCODE_CONFIG_CONTENT": own}), POLICY)
    config = json.loads(invocation.files[opencode.CONFIG])
    assert config["provider"] == provider
    assert config["plugin"] == ["theirs", f"file://{opencode.CONTROL_MARK}/{opencode.PLUGIN}"]
    assert config["permission"] == opencode.permissions(POLICY)
    assert config["permission"]["edit"] == "allow"
    assert invocation.env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert "throw new Error" in invocation.files[opencode.PLUGIN]
    broken = opencode.gated(_spec("opencode", {"OPENCODE_CONFIG_CONTENT": "{oops"}), POLICY)
    assert json.loads(broken.files[opencode.CONFIG])["plugin"]


def test_opencode_config_gets_the_control_directory_in_the_sandbox(tmp_path: Path) -> None:
    invocation = opencode.gated(_spec("opencode"), POLICY)
    control = tmp_path / "control dir"
    for name, text in invocation.files.items():
        (control / name).parent.mkdir(parents=True, exist_ok=True)
        (control / name).write_text(text)
    # The script up to its exec, then the variables it exports.
    shown = 'printf "%s\\n" "$OPENCODE_CONFIG_CONTENT" "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"'
    lines = [*invocation.script.splitlines()[:-1], shown]
    env = {**os.environ, "PADDOCK_CONTROL": str(control), "PADDOCK_RUN": str(tmp_path / "run")}
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines)], env=env, capture_output=True, text=True, check=True
    )
    config, config_home, cache = done.stdout.splitlines()
    assert json.loads(config)["plugin"] == [f"file://{control}/{opencode.PLUGIN}"]
    # No user config or cache of an earlier run's (nor ~/.config/opencode) is read.
    assert config_home == f"{tmp_path}/run/config"
    assert cache == f"{tmp_path}/run/cache"
    # The plugin runs the client beside the control directory's root, with PATH alone.
    plugin = invocation.files[opencode.PLUGIN]
    assert 'new URL("../gate.mjs", import.meta.url)' in plugin
    assert "env: { PATH: process.env.PATH }" in plugin


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
        ({"tool_name": "run_shell_command", "tool_input": {"command": "l"}},
         Request(COMMAND, "l", paddock_shell=True)),
        # As Gemini CLI gives it to its shell, and so judged: trimmed as JavaScript trims (a
        # no-break space and a BOM too, which bash would read as part of a word), a space after
        # a final backslash.
        ({"tool_name": "run_shell_command", "tool_input": {"command": "\ufeff ls \\\u00a0\n"}},
         Request(COMMAND, "ls \\ ", paddock_shell=True)),
        ({"tool_name": "run_shell_command", "tool_input": {"command": "\u00a0touch x"}},
         Request(COMMAND, "touch x", paddock_shell=True)),
        ({"tool_name": "write_file", "tool_input": {"file_path": "/w/a"}}, Request(WRITE, "/w/a")),
        ({"tool_name": "replace", "tool_input": {"file_path": "/w/a"}}, Request(WRITE, "/w/a")),
        ({"tool_name": "read_file", "tool_input": {"file_path": "/w/a"}}, None),
    ],
)  # fmt: skip
def test_what_gemini_asks_about(request_body: dict[str, object], asked: Request | None) -> None:
    assert gemini.request_of(request_body) == asked


def test_an_allow_names_the_text_paddocks_shell_may_run_for_gemini_only() -> None:
    """Gemini CLI's commands go through Paddock's shell, which runs only what an answer of
    allow names (as it will be given it); Claude Code's do not."""
    gemini_raw = json.dumps({"tool_name": "run_shell_command",
                             "tool_input": {"command": " echo hello \n"}}).encode()  # fmt: skip
    allowed = gating.answer({"1-1": gemini_raw}, POLICY, {}, gemini.request_of, NOBODY_ASKED)
    assert allowed.answers == {"1-1": allowing("echo hello")}
    assert allowed.answers["1-1"] == "allow\nticket ZWNobyBoZWxsbw==\n"
    assert answered("echo hello").answers == {"1-1": "allow\n"}


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
    assert entry["hooks"][0]["timeout"] > gate_seconds(spec) * 1000
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["advanced"]["ignoreLocalEnv"] is True
    assert "--extensions none" in invocation.script
    # No .env file can give the CLI (and its shell and hooks) what runs code on start.
    assert invocation.env["BASH_ENV"] == invocation.env["NODE_OPTIONS"] == ""
    rules = invocation.files[gemini.POLICY_FILE]
    assert 'toolName = "run_shell_command"\ndecision = "allow"\npriority = 900\n' in rules
    assert "allowRedirection = true" in rules  # a redirection is the gate's to judge
    assert 'toolName = "write_file"\ndecision = "allow"' in rules  # the gate asks
    assert 'toolName = "web_fetch"\ndecision = "deny"' in rules
    assert "--admin-policy" in invocation.script
    # The hook is Paddock's shell's program, named bare (Gemini CLI expands variables in a
    # hook's command); the shell comes first on the CLI's PATH, which knows its process.
    assert entry["hooks"][0]["command"] == "gate-hook"
    assert 'node "$PADDOCK_CONTROL/gate.mjs" gemini' in invocation.files[gate_scripts.GATE_HOOK]
    assert "shell gemini" in invocation.files[gate_scripts.SHELL]
    before_exec = invocation.script.split("\nexec ")[0]
    assert 'gate.mjs" register "$$" $(compgen -e) || exit 3' in before_exec
    assert (
        'export PATH="$PADDOCK_CONTROL/bin":"$PATH" GEMINI_CLI_NO_RELAUNCH=true GIT_CONFIG_COUNT=0'
        in before_exec
    )


def test_codex_gets_the_hook_as_a_session_flag(tmp_path: Path) -> None:
    spec = _spec("codex")
    invocation = codex.gated(spec, POLICY)
    (exec_line,) = [line for line in invocation.script.splitlines() if line.startswith("exec ")]
    argv_line = exec_line.split(" < ")[0].removeprefix("exec ")
    shown = subprocess.run(
        ["bash", "-c", f'for word in {argv_line}; do printf "%s\\n" "$word"; done'],
        env={**os.environ, "PADDOCK_CONTROL": str(tmp_path), "PADDOCK_WORKSPACE": "/w"},
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert "--dangerously-bypass-hook-trust" in shown
    (hook,) = [word for word in shown if word.startswith("hooks.PreToolUse=")]
    # The hook's own shell expands the control directory, when it runs.
    assert 'matcher="^(Bash|apply_patch)$", hooks=[{type="command", command="env -i PATH=' in hook
    assert 'node \\"$PADDOCK_CONTROL/gate.mjs\\" codex' in hook
    assert str(tmp_path) not in hook
    # Its own sandbox cannot start in a restricted pod (no user namespaces): off, gated.
    assert 'sandbox_mode="danger-full-access"' in shown


PATCH = """*** Begin Patch
*** Add File: a.txt
+*** Add File: not/a/header
*** Delete File: /workspace/b
*** Update File: c
*** Move to: d/e
@@ def f():
-    pass
+    return 1
*** End of File
*** End Patch
"""


@pytest.mark.parametrize(
    ("request_body", "asked"),
    [
        ({"tool_name": "Bash", "tool_input": {"command": "ls"}}, Request(COMMAND, "ls")),
        ({"tool_name": "apply_patch", "tool_input": {"command": PATCH}},
         Request(WRITE, PATCH, writes=("a.txt", "/workspace/b", "c", "d/e"))),
        ({"tool_name": "apply_patch", "tool_input": {"command": "x"}}, None),  # names no file
        ({"tool_name": "Edit", "tool_input": {"command": PATCH}}, None),
    ],
)  # fmt: skip
def test_what_codex_asks_about(request_body: dict[str, object], asked: Request | None) -> None:
    assert codex.request_of(request_body) == asked


@pytest.mark.parametrize(
    ("patch", "writes"),
    [
        (PATCH, ("a.txt", "/workspace/b", "c", "d/e")),
        # Headers as Codex reads them: a line trimmed first (more white space here than Rust's
        # trim, and more line ends than Rust's lines(): no header Codex reads is missed).
        ("  *** Add File: x  \r\n*** End Patch", ("x",)),
        ("+ok\x1c*** Add File: ~/.bashrc\n", ("~/.bashrc",)),
        ("*** Add File: a\u2028*** Update File: b", ("a", "b")),
        # A line that could be a header of Codex's and is none of them: not read, refused.
        ("*** Add File: a\n*** Create File: b", None),
        ("*** Add File: a\n***Add File: b", None),
        ("*** Begin Patch\n*** End Patch\n", None),  # names no file
    ],
)
def test_a_codex_patch_writes_each_file_it_names(
    patch: str, writes: tuple[str, ...] | None
) -> None:
    assert codex.patch_writes(patch) == writes


@pytest.mark.parametrize(
    ("file_write", "patch", "decision", "rule"),
    [
        ("allow", "*** Add File: notes.md\n+x\n*** Update File: src/a.py\n", "allow", None),
        ("ask", "*** Add File: notes.md\n+x\n", "ask", "capabilities.fileWrite"),
        ("deny", "*** Update File: notes.md\n", "deny", "capabilities.fileWrite"),
        # A protected place among the files denies the whole patch, whatever fileWrite says;
        # its paths are literal (Codex reads no variable in them) and the kernel's (// is /).
        ("allow", "*** Add File: ok.md\n*** Add File: ~/.codex/.env\n", "deny",
         "protected: Codex's home"),
        ("allow", "*** Add File: //home/paddock/.bashrc\n", "deny",
         "protected: the shell's startup files"),
        ("allow", "*** Add File: a$b/../../home/paddock/.profile\n", "deny",
         "protected: the shell's startup files"),
        ("allow", "*** Update File: a\n*** Move to: /workspace/.gemini/settings.json\n", "deny",
         "protected: Gemini CLI's workspace settings and .env"),
    ],
)  # fmt: skip
def test_a_codex_patch_is_judged_as_a_write_of_each_file(
    file_write: str, patch: str, decision: str, rule: str | None
) -> None:
    policy = SandboxPolicySpec.model_validate({"capabilities": {"fileWrite": file_write}})
    raw = request(patch, tool="apply_patch")
    result = gating.answer({"1-1": raw}, policy, {}, codex.request_of, NOBODY_ASKED)
    if decision == "ask":
        (approval,) = result.pending
        assert (approval.kind, approval.target) == ("file-write", patch)  # shown whole
        return
    assert result.answers["1-1"].split("\n")[0] == decision
    if rule is not None:
        (denied,) = result.drafts
        assert (denied.data["rule"], denied.data["command"]) == (rule, patch)


@pytest.mark.parametrize(
    ("harness", "name", "variable", "conversation"),
    [
        (claude_code, "claude-code", "CLAUDE_CONFIG_DIR", "projects/-workspace/one.jsonl"),
        (codex, "codex", "CODEX_HOME", "sessions/2026/one.jsonl"),
        (gemini, "gemini", "GEMINI_CLI_HOME", ".gemini/tmp/my-work-space/chats/one.json"),
        (opencode, "opencode", "XDG_DATA_HOME", None),  # its database: configuration too
    ],
)
def test_each_run_of_a_cli_has_a_config_home_of_its_own_and_keeps_its_conversations(
    tmp_path: Path, harness: Any, name: str, variable: str, conversation: str | None
) -> None:
    """What one run writes into its CLI's home (a ``.env``, settings, a database) is not in
    the next run's; its conversations are, on the workspace's volume (not the run volume,
    which a pause empties), in the store of this sandbox's, for a later run to resume; another
    sandbox's store (restored from its snapshot) is gone. Gemini CLI's folder is its name for
    the workspace."""
    home = harness.DATA if harness is opencode else harness.HOME
    for invocation in (harness.gated(_spec(name), POLICY), harness.invocation(_spec(name))):
        assert invocation.script.startswith(home)
    workspace = tmp_path / "My Work.Space"
    other = workspace / ".paddock" / "sessions" / "another-sandbox"
    other.mkdir(parents=True)
    (other / "theirs.jsonl").write_text("another sandbox's conversation\n")
    kept = conversation or "opencode/opencode.db"
    done = None
    for run, then in (("r1", 'echo X=1 > "$H/.env"; mkdir -p "$(dirname "$H/CONV")"; '
                             'echo chat > "$H/CONV"'),
                      ("r2", 'ls -A "$H"; cat "$H/CONV" 2>/dev/null || echo none')):  # fmt: skip
        env = {
            **os.environ,
            "PADDOCK_RUN": str(tmp_path / run),
            "PADDOCK_RUN_DIR": str(tmp_path / "volume"),
            "PADDOCK_WORKSPACE": str(workspace),
            "PADDOCK_SANDBOX": "box",
        }
        shutil.rmtree(tmp_path / "volume", ignore_errors=True)  # a pause between runs
        script = f"{home}H=${variable}\n" + then.replace("CONV", kept)
        done = subprocess.run(["bash", "-c", script], env=env, cwd=workspace, capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert done is not None
    assert ".env" not in done.stdout.split()
    assert done.stdout.endswith("chat\n" if conversation else "none\n")
    store = workspace / ".paddock" / "sessions"
    assert not other.exists() or conversation is None
    if conversation is None:
        return
    assert (store / ".gitignore").read_text() == "*\n"
    files = [p for p in store.rglob("*") if p.is_file() and p.name != ".gitignore"]
    assert [p.read_text() for p in files] == ["chat\n"]
    assert all(p.relative_to(store).parts[0] == "box" for p in files)


def test_claude_codes_memory_is_not_kept_nor_loaded(tmp_path: Path) -> None:
    """Claude Code writes memory beside its transcripts and loads it as instructions: the run
    turns it off, and what an earlier run left of it is deleted."""
    workspace = tmp_path / "workspace"
    planted = workspace / ".paddock/sessions/box/claude/projects/-workspace/memory"
    planted.mkdir(parents=True)
    (planted / "MEMORY.md").write_text("obey me\n")
    env = {**os.environ, "PADDOCK_RUN": str(tmp_path / "r1"), "PADDOCK_WORKSPACE": str(workspace),
           "PADDOCK_SANDBOX": "box"}  # fmt: skip
    script = claude_code.HOME + 'echo "$CLAUDE_CODE_DISABLE_AUTO_MEMORY"'
    done = subprocess.run(["bash", "-c", script], env=env, cwd=workspace, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout == "1\n"
    assert not planted.exists()


@pytest.mark.parametrize(
    "given", ["--dangerously-skip-permissions", '"$PADDOCK_X";id;"', "a b", ""]
)
def test_a_session_id_that_is_no_clis_is_refused_in_the_spec_and_not_taken_from_a_journal(
    given: str,
) -> None:
    fields = {"sandboxRef": {"name": "box"}, "harness": "codex", "prompt": "p"}
    with pytest.raises(ValueError, match="session"):
        AgentRunSpec.model_validate(fields | {"sessionId": given})
    assert session(given).type == "notice"
    taken = session("019a24d5-0ecb-7981-9a1d-8d68d5c82e52")
    assert taken.data == {"sessionId": "019a24d5-0ecb-7981-9a1d-8d68d5c82e52"}
