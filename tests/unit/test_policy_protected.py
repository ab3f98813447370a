"""No command or file tool of an agent may write where the gate and the CLIs' settings live,
whatever capabilities.fileWrite says; and a policy that lets the agent both write files and
run files of the workspace says so (paddock policy check, the Valid condition)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.check import warnings
from paddock.policy.engine import UNRESTRICTED, PartKind, evaluate
from paddock.policy.gate import judge_capability
from paddock.sandboxes.policy import decide_policy

# The policy of the issue's attacks: writes allowed, the attacks' commands allowed.
POLICY = SandboxPolicySpec.model_validate(
    {"commands": {"allow": ["echo *", "ls *", "cat *", "printf *", "tee *", "cd *", "pushd *",
                            "true", "make*", "find *", "script *", "strace *"],
                  "deny": ["touch pwned-*"], "default": "deny"}}
)  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [
        "echo 'exit 0' > \"$PADDOCK_RUN/gate\"",
        "echo allow > ${PADDOCK_RUN}/requests/1.ans",
        "echo allow >> $PADDOCK_RUN/../other-run/requests/2.ans",
        "printf x > /paddock/run/0f3c/gate",
        'echo \'{"disableAllHooks": true}\' > "$HOME/.claude/settings.json"',
        "echo x > ~/.claude/settings.local.json",
        "echo 'export default {}' > ~/.config/opencode/plugin/evil.js",
        "echo x > $XDG_CONFIG_HOME/opencode/opencode.json",
        "echo x > ${HOME}/.gemini/settings.json",
        "echo x > $GEMINI_CLI_HOME/.gemini/settings.json",
        "echo x > $CODEX_HOME/config.toml",
        "echo x > ../home/paddock/.codex/config.toml",
        "echo x > ./build/../../paddock/run/r/gate",
        "echo ok && echo x > ~/.gemini/settings.json",
        "bash -c 'echo x > ~/.claude/settings.json'",
        "eval 'echo x >$HOME/.claude/settings.json'",
        "(echo x &> /home/paddock/.claude/settings.json)",
        "echo $(echo x > ~/.codex/config.toml)",
        "echo 'process.exit(0)' > \"$PADDOCK_CONTROL/gate.mjs\"",
        "echo x > /paddock/control/runs/r/claude/settings.json",
        "echo 'touch pwned' >> ~/.bashrc",
        "echo 'alias ls=x' >> $HOME/.profile",
        "echo x > /home/paddock/.bash_profile",
        "echo BASH_ENV=x > .gemini/.env",
        "echo '{}' > $PADDOCK_WORKSPACE/.gemini/settings.json",
        "echo x > ~/.local/share/opencode/bin/rg",
        # A path as the kernel reads it: a leading // is /.
        "echo x > //workspace/.gemini/.env",
        "echo x >> //home/paddock/.bashrc",
        "echo x > ///paddock/control/runs/r/gate.mjs",
        # A relative path, from each directory the command may cd to.
        "cd ~/.claude && echo x > settings.json",
        "cd; echo 'touch pwned' >> .bashrc",
        "pushd /paddock/run/r && echo 'exit 0' > gate",
        "cd ~ && cd .codex && echo x > config.toml",
        "command cd -P -- ~/.gemini; echo x > settings.json",
        "cd /tmp; bash -c 'echo x > ../home/paddock/.profile'",
        "cd a; cd b; cd c; cd d; cd ~/.claude && echo x > settings.json",
        'cd "$HOME" && echo x >> .bashrc',
        "cd $HOME/.claude && echo x > settings.json",
        "CDPATH=~ cd .claude && echo x > settings.json",  # CDPATH: not followed, denied
        "OLDPWD=~; cd -; echo x >> .bashrc",
        "cd && echo x >> ~+/.bashrc",  # the directory it is in
        "cd /tmp; cd; cd /; echo x >> ~-/.bashrc",  # ... or was in
        "cd; echo x >> $PWD/.bashrc",
        "echo x >> ${HOME%/}/.bashrc",  # an operator on a known variable: its value
        "echo x >> ~paddock/.bashrc",  # the sandbox's user's HOME
        "echo x >> ~/.bashr[c]",  # bash globs a target that matches one file
        "echo x > ~/.clau[d]e/settings.json",
        ">> ~/.bashrc",  # a statement of a redirection alone
        "echo x > /$HOME/.bashrc",  # a known variable anywhere in the path
        "echo x > ${HOME%/paddock}/paddock/.bashrc",  # an operator: any text, a glob
        "echo x > ${X:-~}/.bash_login",
        "env -C /home/paddock bash -c 'echo x > .bashrc'",  # where a wrapper runs it
        "sudo -D ~ sh -c 'echo x > .profile'",
        "find ~/.cache -execdir sh -c 'echo x > .bashrc' \\;",  # each file's directory
        "strace -o ~/.bashrc true",  # a wrapper's own file
        "script -qc ls ~/.bashrc",
        "script -q -O ~/.bashrc -c true",
    ],
)
def test_a_write_into_the_gates_or_a_clis_settings_is_denied_whatever_file_write_says(
    command: str,
) -> None:
    verdict = evaluate(POLICY, command)
    assert verdict.decision == Decision.DENY, verdict.explain()
    assert verdict.deciding is not None
    assert verdict.deciding.kind == PartKind.FILE_WRITE
    assert verdict.deciding.rule.startswith("protected: ")


@pytest.mark.parametrize(
    "command",
    [
        "echo x > out.txt",
        "echo x > /workspace/.claude/settings.json",  # the workspace's: no gated CLI reads it
        "echo x > /home/paddock/.claudex",
        "echo x > /home/paddock/notes.txt",
        "echo x > /tmp/paddock/run",
        "cat ~/.claude/settings.json",  # reading is not writing
        'echo x > "$f"',  # not told: capabilities.fileWrite decides (documented)
        "cd build && echo x > out.txt",
        'cd "$d" && echo x > out.txt',  # (not followed: the read-only mounts hold)
        "echo x > $OUT/log.txt",
        "env -C build make > log.txt",
    ],
)
def test_other_writes_follow_file_write(command: str) -> None:
    assert evaluate(POLICY, command).decision == Decision.ALLOW


@pytest.mark.parametrize(
    "target",
    [
        "/paddock/run/r/gate",
        "/home/paddock/.config/opencode/plugin/x.js",
        # A file tool's path is literal (no shell expands it), and the kernel's: a leading //
        # is /, and a segment with a $ or a backtick is a name like any other.
        "//workspace/.gemini/.env",
        "//home/paddock/.bashrc",
        "x`/../.gemini/settings.json",
        "a$b/../../home/paddock/.bashrc",
        "$HOME/../../home/paddock/.codex/config.toml",
        ".gemini/settings.json",
        "~/.claude/settings.json",  # as a shell or a CLI that expands it would read it
    ],
)
def test_a_clis_own_file_tool_cannot_write_the_gate_either(target: str) -> None:
    judged = judge_capability(POLICY, PartKind.FILE_WRITE, target)
    assert judged.decision == Decision.DENY, judged.verdict.explain()


def test_a_clis_own_file_tool_writes_elsewhere_as_file_write_says() -> None:
    assert judge_capability(POLICY, PartKind.FILE_WRITE, "/workspace/x").decision == (
        Decision.ALLOW
    )


@pytest.mark.parametrize(
    ("rule", "warned"),
    [
        ("bash scripts/check.sh", True),
        ("sh ./run.sh", True),
        ("python3 tools/*", True),
        ("./configure*", True),
        ("scripts/test", True),
        ("npm test", True),
        ("make *", True),
        ("go test ./...", True),
        ("pytest*", True),
        ("bash /usr/local/bin/fixed.sh", False),  # a file outside the workspace
        ("echo *", False),
        ("git status*", False),
        ("bash", False),  # reads its stdin: judged as a shell by the engine
        ("ls *", False),
    ],
)
def test_a_rule_that_runs_workspace_files_is_a_warning_while_files_may_be_written(
    rule: str, warned: bool
) -> None:
    spec = {"commands": {"allow": [rule]}}
    assert bool(warnings(SandboxPolicySpec.model_validate(spec))) == warned
    for guarded in ("ask", "deny"):
        fenced = {**spec, "capabilities": {"fileWrite": guarded}}
        assert warnings(SandboxPolicySpec.model_validate(fenced)) == []


def test_the_valid_condition_says_so_once_with_a_warning() -> None:
    now = datetime(2026, 12, 3, tzinfo=UTC)
    body = {
        "metadata": {"name": "p", "namespace": "n", "generation": 1},
        "spec": {"commands": {"allow": ["bash scripts/check.sh"]}},
    }
    plan = decide_policy(body, now)
    (valid,) = plan.status.to_api()["conditions"]
    assert (valid["status"], valid["reason"]) == ("True", "RunsWritableFiles")
    assert "'bash scripts/check.sh' runs files of the workspace" in valid["message"]
    assert [(n.type, n.reason) for n in plan.notices] == [("Warning", "RunsWritableFiles")]


def test_without_a_policy_nothing_is_protected_from_a_command() -> None:
    # No SandboxPolicy: the pod is the boundary and no command is refused.
    assert evaluate(UNRESTRICTED, 'echo x > "$PADDOCK_RUN/exit"').decision == Decision.ALLOW
