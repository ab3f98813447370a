"""The run and sandbox commands' pure parts: the AgentRun they create, the exit code exec gives
for each way a run ends, an example in every command's --help, and the kubectl plugin's name."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paddock.api.agentrun import AgentRunSpec
from paddock.cli.complete import NAMED, add_completers
from paddock.cli.main import build_parser
from paddock.client.runs import exit_code, run_manifest


def test_a_run_goes_in_a_sandbox_or_a_fresh_one_of_a_workspace_and_is_a_valid_spec() -> None:
    in_box = run_manifest(harness="command", command="make test", sandbox="box", prefix="exec-")
    assert in_box["metadata"]["generateName"] == "exec-"
    assert in_box["spec"] == {
        "harness": "command",
        "sandboxRef": {"name": "box"},
        "command": "make test",
    }
    fresh = run_manifest(harness="codex", prompt="fix it", workspace="app", model="m", timeout="5m")
    assert fresh["spec"]["sandboxTemplate"] == {"workspaceRef": {"name": "app"}}
    for manifest in (in_box, fresh):
        AgentRunSpec.model_validate(manifest["spec"])  # what the API server would accept


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"phase": "Succeeded", "exitCode": 0}, 0),
        ({"phase": "Failed", "exitCode": 3}, 3),
        ({"phase": "TimedOut", "exitCode": None}, 124),
        ({"phase": "Cancelled"}, 130),
        ({"phase": "Failed", "reason": "PolicyDenied", "exitCode": None}, 126),
    ],
)
def test_exec_exits_with_the_commands_code_or_a_shells_for_what_stopped_it(
    data: dict[str, object], code: int
) -> None:
    assert exit_code({"type": "run.failed", "data": data}) == code
    assert exit_code(None) == 126  # ended with no terminal event


def _subcommands(
    parser: argparse.ArgumentParser, path: str = "paddock"
) -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{path} {name}"] = sub
                found |= _subcommands(sub, f"{path} {name}")
    return found


def test_every_commands_help_shows_an_example() -> None:
    commands = _subcommands(build_parser())
    assert {
        "paddock exec",
        "paddock run",
        "paddock cancel",
        "paddock pause",
        "paddock resume",
    } <= set(commands)
    missing = [name for name, sub in commands.items() if "example: " not in sub.format_help()]
    assert missing == []


def test_each_name_argument_completes_its_kind() -> None:
    parser = build_parser()
    add_completers(parser)
    commands = _subcommands(parser)
    for command, dest in (
        ("paddock exec", "sandbox"),
        ("paddock logs", "run"),
        ("paddock cancel", "run"),
    ):
        (action,) = [a for a in commands[command]._actions if a.dest == dest]
        assert getattr(action, "completer", None) is not None, command
    assert set(NAMED.values()) == {"Sandbox", "AgentRun", "Workspace", "SandboxPolicy"}


def test_as_a_kubectl_plugin_the_usage_says_kubectl_paddock() -> None:
    assert build_parser("kubectl paddock").format_usage().startswith("usage: kubectl paddock")


def test_exec_takes_every_word_after_the_first_double_dash_as_the_command() -> None:
    from paddock.cli.main import _parsed

    args = _parsed(build_parser(), ["exec", "box", "-n", "team", "--", "sh", "-c", "x", "--", "-n"])
    assert (args.sandbox, args.namespace, args.argv) == (
        "box",
        "team",
        ["sh", "-c", "x", "--", "-n"],
    )


@pytest.mark.parametrize(
    "argv",
    [["mcp"], ["logs", "some-run"], ["exec", "box", "--", "ls"], ["approve", "some-run"]],
)
def test_a_command_with_no_cluster_to_talk_to_says_so_in_one_line_and_exits_non_zero(
    argv: list[str], tmp_path: Path
) -> None:
    # As an MCP client's stdio launch leaves it: no KUBECONFIG, a HOME without ~/.kube/config.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "paddock.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"no kubeconfig at {tmp_path}/.kube/config" in lines[0]
