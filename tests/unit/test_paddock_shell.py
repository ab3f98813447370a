"""Paddock's shell (data/gate/shell.sh), with the real parts: the script run by the real dash
(``/bin/sh``) and bash, the gate server and client by a real node, the tickets written by the
operator's own answer (``allowing``). The test's process stands for the CLI: it
registers itself, then starts the shell as Gemini CLI does (``bash -c TEXT``, TEXT being the
command in Gemini CLI's wrapping)."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock.agentruns.asking import allowing
from paddock.harness import gemini
from paddock.render import gate_scripts as gs
from support.gate_channel import Channel, outcome, prepared, request

HOOK = 'echo "the hook ran in $PADDOCK_CONTROL"'


def wrapped(command: str, jobs: str = "/tmp/gemini-shell-a1B2c3/bgpids.tmp") -> str:
    """The text Gemini CLI 0.61 gives its shell for ``command`` (ShellTool's background-jobs
    subshell, ShellExecutionService's guard); ``jobs``: its jobs file, quoted as shell-quote
    does (bare, or in single quotes when it has more than letters, digits and ``_./-``)."""
    return (
        "shopt -u promptvars nullglob extglob nocaseglob dotglob; "
        f"_bgpids_file={jobs}\n"
        "(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n"
        f"{gemini.shell_text(command)}\n)\n__code=$?\nexit $__code"
    )


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[Channel]:
    with prepared(tmp_path, gs.paddock_shell("gemini", HOOK)) as channel:
        yield channel


def register(channel: Channel, pid: int) -> subprocess.CompletedProcess[str]:
    """As the harness registers the CLI: its pid, and the names of its environment (this
    process's)."""
    argv = ["node", str(channel.control / gs.CLIENT), "register", str(pid), *os.environ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


# What a CLI's environment gains from a file of the agent's (Gemini CLI's .gemini/.env): bash's
# options and trace prompt, git configuration, a name of the agent's own.
GAINED = {"SHELLOPTS": "xtrace", "PS4": "$(touch traced)", "GIT_CONFIG_PARAMETERS":
          "'core.pager=touch paged'", "FROM_THE_AGENT": "1"}  # fmt: skip


def shell(channel: Channel, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Paddock's shell started by this process (the registered CLI, when it registered), with
    what a CLI's environment gains from the agent and what Gemini CLI adds itself."""
    env = {**os.environ, **GAINED, "GEMINI_CLI": "1", "GIT_CONFIG_KEY_0": "core.pager"}
    return subprocess.run(
        [str(channel.control / gs.SHELL), *argv], capture_output=True, text=True, cwd=cwd,
        env=env, timeout=30, check=False,
    )  # fmt: skip


def allow(channel: Channel, command: str, answer: str | None = None) -> None:
    """A hook asks about ``command`` and the operator answers (as ``gating`` allows it)."""
    client = channel.ask(request(command), harness="gemini")
    channel.answer(dict.fromkeys(channel.waiting(), answer or allowing(gemini.shell_text(command))))
    assert outcome(client)[0] == (0 if (answer or "allow").startswith("allow") else 2)


def test_the_first_registration_names_the_cli_read_only_and_a_second_is_refused(
    channel: Channel,
) -> None:
    assert register(channel, os.getpid()).returncode == 0
    named = channel.control / "cli.pid"
    assert named.read_text() == f"{os.getpid()}\n"
    assert (channel.control / "cli.env").read_text().split("\n") == list(os.environ)
    for written in (named, channel.control / "cli.env"):
        assert stat.S_IMODE(written.stat().st_mode) == 0o644
    again = register(channel, 1)
    assert again.returncode == 2
    assert "already registered" in again.stderr
    assert named.read_text() == f"{os.getpid()}\n"
    for program in (gs.SHELL, gs.GATE_HOOK):
        assert stat.S_IMODE((channel.control / program).stat().st_mode) == 0o755


def test_the_clis_shell_runs_an_allowed_command_once_and_nothing_else(
    channel: Channel, tmp_path: Path
) -> None:
    assert register(channel, os.getpid()).returncode == 0
    refused = shell(channel, "-c", wrapped("touch refused"), cwd=tmp_path)
    assert refused.returncode == 126
    assert "did not allow this command" in refused.stderr
    assert not (tmp_path / "refused").exists()

    allow(channel, "  touch ran \n")
    ran = shell(channel, "-c", wrapped("  touch ran \n"), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "ran").exists()
    # Without what the CLI gained from the agent; with the harness's and the CLI's own.
    allow(channel, "env > seen")
    assert shell(channel, "-c", wrapped("env > seen"), cwd=tmp_path).returncode == 0
    seen = dict(line.split("=", 1) for line in (tmp_path / "seen").read_text().splitlines())
    assert set(GAINED) & set(seen) == set()
    assert seen["GEMINI_CLI"] == "1"
    assert seen["GIT_CONFIG_KEY_0"] == "core.pager"
    assert seen["PATH"] == os.environ["PATH"]
    allow(channel, "touch quoted")
    jobs = "'/tmp/a dir/gemini-shell-a1B2c3/bgpids.tmp'"
    assert shell(channel, "-c", wrapped("touch quoted", jobs), cwd=tmp_path).returncode == 0
    assert (tmp_path / "quoted").exists()
    (tmp_path / "ran").unlink()
    assert shell(channel, "-c", wrapped("touch ran"), cwd=tmp_path).returncode == 126  # once
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["-c", "touch other"],  # not as Gemini CLI wraps a command
        ["-c", wrapped("touch ran") + "\ntouch other"],  # more after the wrapping
        ["-c", wrapped("touch ran", "x;touch${IFS}other")],
        ["-c", wrapped("touch ran", "$(touch other)")],
        ["-c", wrapped("touch ran", "'x' ; touch other ; 'y'")],
        ["-c", wrapped("touch ran", '"$(touch other)"')],
        ["-c", wrapped("touch ran"), "extra"],
        ["-lc", wrapped("touch ran")],
        ["script.sh"],
    ],
)
def test_the_clis_shell_refuses_text_other_than_the_allowed_commands_wrapping(
    channel: Channel, tmp_path: Path, argv: list[str]
) -> None:
    assert register(channel, os.getpid()).returncode == 0
    allow(channel, "touch ran")
    (tmp_path / "script.sh").write_text("touch other\n")
    assert shell(channel, *argv, cwd=tmp_path).returncode == 126
    assert not (tmp_path / "other").exists()
    assert not (tmp_path / "ran").exists()


def test_a_denial_or_a_killed_hook_leaves_nothing_to_run(channel: Channel, tmp_path: Path) -> None:
    assert register(channel, os.getpid()).returncode == 0
    # A denial never lets its text run, whatever lines it carries.
    allow(channel, "touch ran", answer="deny\nticket " + allowing("touch ran").split()[-1] + "\n")
    assert shell(channel, "-c", wrapped("touch ran"), cwd=tmp_path).returncode == 126
    # The hook killed while it waits: the CLI runs the command, its shell refuses it.
    client = channel.ask(request("touch ran"), harness="gemini")
    channel.waiting()
    client.kill()
    client.wait(timeout=30)
    assert shell(channel, "-c", wrapped("touch ran"), cwd=tmp_path).returncode == 126
    assert not (tmp_path / "ran").exists()


def test_the_clis_shell_runs_the_hook_as_the_settings_give_it(
    channel: Channel, tmp_path: Path
) -> None:
    assert register(channel, os.getpid()).returncode == 0
    ran = shell(channel, "-c", "gate-hook", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, f"the hook ran in {channel.control}\n")
    assert shell(channel, "-c", "gate-hook; touch other", cwd=tmp_path).returncode == 126
    assert shell(channel, "-c", HOOK, cwd=tmp_path).returncode == 126
    assert not (tmp_path / "other").exists()


def test_a_shell_started_by_anything_but_the_cli_is_bash(channel: Channel, tmp_path: Path) -> None:
    """A command the gate allowed runs `bash` (the PATH it inherits comes first), or the agent
    starts it: that shell is bash. Before the CLI is registered, no shell runs unasked."""
    nested = f"{channel.control / gs.SHELL} -c 'echo $BASH_VERSION > nested'"
    before = subprocess.run(["/bin/sh", "-c", nested], cwd=tmp_path, timeout=30, check=False)
    assert before.returncode == 126
    assert register(channel, os.getpid()).returncode == 0
    after = subprocess.run(["/bin/sh", "-c", nested], cwd=tmp_path, timeout=30, check=False)
    assert after.returncode == 0
    assert (tmp_path / "nested").read_text().startswith("5.")


def test_gemini_trims_a_command_as_javascript_does() -> None:
    """The ends ``shell_text`` trims are those JavaScript's ``trim`` does (real node), so the
    ticket is the text Gemini CLI gives its shell."""
    found = subprocess.run(
        ["node", "-e", "for (let c = 0; c < 0x10000; c++) "
         "if (String.fromCharCode(c).trim() === '') console.log(c)"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.split()  # fmt: skip
    assert {chr(int(c)) for c in found} == set(gemini.JS_WHITESPACE)
