"""No user value that reaches a generated script runs as code: quotes, newlines, ``$()``,
backticks, arithmetic and globs go through every script Paddock generates, under a real bash,
and each arrives as the literal text it was, while the canaries the values would create if
they were executed never appear."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from paddock.api.agentrun import AgentRunSpec, Harness
from paddock.api.workspace import WorkspaceSpec
from paddock.harness import HARNESSES
from paddock.render import gate_scripts
from paddock.render import run_scripts as rs
from paddock.render.init_scripts import ASKPASS_SCRIPT, CLONE_SCRIPT, render_project_script
from paddock.render.projections import render_projection
from paddock.render.setup_script import render_setup_script
from support.waiting import wait_for


def hostile(tag: str) -> list[str]:
    """Values that create ``$CANARY/<tag>-...`` if any shell evaluates them. ``${IFS}`` stands
    for a space, so that fields refusing spaces still take them."""
    touch = "touch${IFS}$CANARY/" + tag
    return [
        f"$({touch}-sub)",
        f"`{touch}-tick`",
        f"';{touch}-squote;'",
        f'";{touch}-dquote;"',
        f"x\n{touch}-newline\n",
        f"x\r{touch}-cr",
        f"$(({tag.count('x')}+41))",
        "*",
        f"a&{touch}-amp&b",
        f"|{touch}-pipe",
        "\\",
    ]


VALUES = hostile("v")


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    path = tmp_path / "canary"
    path.mkdir()
    return path


def bash(
    script: str, tmp_path: Path, canary: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.sh"
    path.write_text(script)
    full = {**os.environ, "CANARY": str(canary), **(env or {})}
    done = subprocess.run(
        ["bash", str(path)], capture_output=True, env=full, cwd=tmp_path, timeout=60
    )
    # Decoded by hand: text mode would read a carriage return as a newline.
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def text(path: Path) -> str:
    return path.read_bytes().decode()


def assert_nothing_ran(canary: Path) -> None:
    assert sorted(p.name for p in canary.iterdir()) == []


def valid_workspace(**spec: object) -> WorkspaceSpec | None:
    """The spec, or None where the model refuses the value (then it never reaches a script)."""
    try:
        return WorkspaceSpec.model_validate(spec)
    except ValidationError:
        return None


@pytest.mark.parametrize("value", VALUES)
def test_git_skill_values_are_words_of_the_project_script(
    value: str, tmp_path: Path, canary: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    tried = 0
    for git in (
        {"repo": f"/nowhere/{value}"},
        {"repo": "/nowhere", "ref": value},
        {"repo": "/nowhere", "into": f"skills/{value}"},
    ):
        spec = valid_workspace(skills=[{"name": "s", "git": git}])
        if spec is None:
            continue
        tried += 1
        script = render_project_script(render_projection(spec))
        done = bash(script, tmp_path, canary, {"PADDOCK_WORKSPACE": str(workspace)})
        assert done.returncode != 0  # nothing to clone from; the failure is git's
        assert f"project: skill s from {git['repo']}\n" in done.stdout
    # A value with a line break is refused by every field (it never reaches the script); the
    # repository URL takes every other.
    assert bool(tried) == ("\n" not in value and "\r" not in value)
    assert_nothing_ran(canary)


@pytest.mark.parametrize("value", VALUES)
def test_clone_and_askpass_take_their_values_from_the_environment(
    value: str, tmp_path: Path, canary: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {
        "GIT_URL": f"/nowhere/{value}",
        "GIT_REF": value,
        "PADDOCK_WORKSPACE": str(workspace),
        "PADDOCK_TERMINATION_LOG": str(tmp_path / "term"),
    }
    done = bash(CLONE_SCRIPT, tmp_path, canary, env)
    assert done.returncode == 1
    assert text(tmp_path / "term").startswith(f"clone failed: /nowhere/{value} at")
    (tmp_path / "askpass.sh").write_text(ASKPASS_SCRIPT)
    said = subprocess.run(
        ["bash", str(tmp_path / "askpass.sh"), "Password for x:"],
        capture_output=True,
        env={"PADDOCK_ASKPASS_TOKEN_VAR": "TOKEN", "TOKEN": value, "CANARY": str(canary)},
        check=True,
    )
    assert said.stdout.decode() == value + "\n"
    assert_nothing_ran(canary)


@pytest.mark.parametrize("value", VALUES)
def test_a_setup_steps_text_is_reported_never_evaluated_again(
    value: str, tmp_path: Path, canary: Path
) -> None:
    steps = [f"printf '%s' {shlex.quote(value)} > out", f"false {shlex.quote(value)}"]
    script = render_setup_script(steps, "1m")
    done = bash(script, tmp_path, canary, {"PADDOCK_TERMINATION_LOG": str(tmp_path / "term")})
    assert done.returncode != 0
    assert text(tmp_path / "out") == value
    report = text(tmp_path / "term")
    assert report.startswith(f"setup step failed: false {shlex.quote(value)} (exit 1)")
    assert_nothing_ran(canary)


@pytest.mark.parametrize("value", VALUES)
def test_a_runs_env_and_prompt_reach_the_harness_as_data(
    value: str, tmp_path: Path, canary: Path
) -> None:
    workspace, run_dir = tmp_path / "workspace", tmp_path / "run"
    workspace.mkdir()
    env = {**os.environ, "PADDOCK_WORKSPACE": str(workspace), "PADDOCK_RUN_DIR": str(run_dir),
           "PADDOCK_CONTROL_DIR": str(tmp_path / "control"),
           "PADDOCK_GATE_DIR": str(tmp_path / "gate")}  # fmt: skip
    harness = 'printf "%s" "$VALUE" > env.out; cat "$PADDOCK_PROMPT_FILE" > prompt.out'
    files = gate_scripts.prepare_payload({"harness": harness}, gated=False)
    argv = gate_scripts.prepare_argv("r1", gated=False)
    subprocess.run(argv, input=files, text=True, env=env, check=True, timeout=30)
    payload = rs.launch_payload("ab" * 32, {"VALUE": value, "CANARY": str(canary)}, value)
    subprocess.run(rs.launch_argv("r1"), input=payload, text=True, env=env, check=True, timeout=30)
    wait_for(lambda: (run_dir / "r1" / "exit").exists(), 30, what="the run's completion record")
    assert text(workspace / "env.out") == value
    assert text(workspace / "prompt.out") == value
    assert_nothing_ran(canary)


FAKE_CLI = """#!/usr/bin/env bash
printf '%s\\0' "$@" > "$ARGV_OUT"
cat > "$ARGV_OUT.stdin"
"""


def _fake_clis(tmp_path: Path, prompt: str) -> dict[str, str]:
    """The four CLIs as fakes recording argv and stdin, the prompt file, and their env."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cli in ("claude", "codex", "opencode", "gemini"):
        (bin_dir / cli).write_text(FAKE_CLI)
        (bin_dir / cli).chmod(0o755)
    (tmp_path / "prompt").write_text(prompt)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ARGV_OUT": str(tmp_path / "argv"),
        "PADDOCK_PROMPT_FILE": str(tmp_path / "prompt"),
        "PADDOCK_WORKSPACE": str(tmp_path),
    }


@pytest.mark.parametrize("harness", [h for h in Harness if h != Harness.COMMAND])
@pytest.mark.parametrize("value", VALUES)
def test_harness_options_are_single_arguments(
    harness: Harness, value: str, tmp_path: Path, canary: Path
) -> None:
    env = _fake_clis(tmp_path, value)
    spec = AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "s"}, "harness": harness, "prompt": value, "model": value}
    )
    # A session id so made is refused by the schema; quoted all the same, should one get past.
    spec = spec.model_copy(update={"session_id": value})
    script = HARNESSES[harness].invocation(spec).script
    done = bash(script, tmp_path, canary, env)
    assert done.returncode == 0, done.stderr
    argv = text(tmp_path / "argv").split("\0")[:-1]
    assert argv.count(value) >= 2  # the model and the session id, each one whole argument
    assert_nothing_ran(canary)


@pytest.mark.parametrize("harness", [h for h in Harness if h != Harness.COMMAND])
def test_a_prompt_of_the_largest_size_reaches_every_cli_whole_on_stdin(
    harness: Harness, tmp_path: Path, canary: Path
) -> None:
    """One argv word holds at most 128 KiB (exit 126 past it); a prompt may be 1 MiB."""
    prompt = ("x" * 1023 + "\n") * 1024
    env = _fake_clis(tmp_path, prompt)
    spec = AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "s"}, "harness": harness, "prompt": "p"}
    )
    done = bash(HARNESSES[harness].invocation(spec).script, tmp_path, canary, env)
    assert done.returncode == 0, done.stderr
    assert text(tmp_path / "argv.stdin") == prompt
    assert max(len(word) for word in text(tmp_path / "argv").split("\0")) < 4096
