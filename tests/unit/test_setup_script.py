"""The setup script, run by a real bash on real files."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from paddock.api.workspace import ParallelGroup, SetupCommand
from paddock.render.init_scripts import SCRUB_FUNCTIONS
from paddock.render.setup_script import render_setup_script
from paddock.runs.scrubbing import variants
from support.waiting import wait_for

Step = str | SetupCommand | ParallelGroup


@dataclass
class Result:
    code: int
    stdout: str
    termination: str


def run_setup(
    tmp_path: Path, steps: list[Step], default_timeout: str = "30m", **env: str
) -> Result:
    script = tmp_path / "setup.sh"
    script.write_text(render_setup_script(steps, default_timeout))
    termination = tmp_path / "termination-log"
    completed = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PADDOCK_TERMINATION_LOG": str(termination), **env},
    )
    text = termination.read_text() if termination.exists() else ""
    return Result(completed.returncode, completed.stdout, text)


def test_cd_and_export_carry_over_between_serial_steps(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    result = run_setup(
        tmp_path, ["cd app", "export GREETING=hello", "echo $GREETING > greeting.txt"]
    )
    assert result.code == 0, result.stdout
    assert (tmp_path / "app" / "greeting.txt").read_text() == "hello\n"
    assert result.termination == ""


def test_parallel_group_starts_from_the_shells_cwd_and_env_and_is_awaited(
    tmp_path: Path,
) -> None:
    (tmp_path / "app").mkdir()
    result = run_setup(
        tmp_path,
        [
            "cd app",
            "export NAME=paddock",
            ParallelGroup(parallel=["sleep 0.3; echo $NAME > a.txt", "pwd > b.txt"]),
            # Runs only after both commands of the group finished.
            "cat a.txt b.txt > both.txt",
        ],
    )
    assert result.code == 0, result.stdout
    app = tmp_path / "app"
    assert (app / "both.txt").read_text() == f"paddock\n{app}\n"


def test_failing_step_stops_setup_with_its_command_exit_code_and_output(tmp_path: Path) -> None:
    result = run_setup(
        tmp_path,
        [
            "echo first > first.txt",
            "echo compiling; echo 'error: no such file' >&2; exit 3",
            "touch never.txt",
        ],
    )
    assert result.code == 3
    lines = result.termination.splitlines()
    assert (
        lines[0]
        == "setup step failed: echo compiling; echo 'error: no such file' >&2; exit 3 (exit 3)"
    )
    assert lines[1:] == ["compiling", "error: no such file"]
    assert (tmp_path / "first.txt").exists()
    assert not (tmp_path / "never.txt").exists()


def test_failing_command_in_a_parallel_group_fails_setup(tmp_path: Path) -> None:
    result = run_setup(
        tmp_path,
        [ParallelGroup(parallel=["echo fine", "echo broken; false"]), "touch never.txt"],
    )
    assert result.code == 1
    assert result.termination.splitlines() == [
        "setup step failed: echo broken; false (exit 1)",
        "broken",
    ]
    assert not (tmp_path / "never.txt").exists()


def test_only_the_tail_of_a_long_output_is_reported(tmp_path: Path) -> None:
    result = run_setup(tmp_path, ["seq 1 500; exit 2"])
    lines = result.termination.splitlines()
    assert lines[0] == "setup step failed: seq 1 500; exit 2 (exit 2)"
    assert lines[1:] == [str(n) for n in range(481, 501)]


def test_step_timeout_stops_the_step_and_setup(tmp_path: Path) -> None:
    """What is stopped is a 300 s sleep after 1 s, so no load makes the test pass late; what
    the report carries of the step's output is the next test's (it needs no clock)."""
    result = run_setup(
        tmp_path,
        [
            "echo started",
            SetupCommand(run="sleep 300; touch late.txt", timeout="1s"),
            "touch never.txt",
        ],
    )
    assert result.code == 124
    lines = result.termination.splitlines()
    assert lines[0] == "setup step timed out after 1s: sleep 300; touch late.txt"
    assert not (tmp_path / "late.txt").exists()
    assert not (tmp_path / "never.txt").exists()


def test_a_timed_out_steps_report_carries_its_output(tmp_path: Path) -> None:
    """The watchdog is woken (its FIFO written, as its timer would end) only once the step's
    output is in the step's log: the report's content, whatever the machine's load."""
    work = tmp_path / "tmp"
    work.mkdir()
    script = tmp_path / "setup.sh"
    step = SetupCommand(run="echo waiting; sleep 300; touch late.txt", timeout="1h")
    script.write_text(render_setup_script(["echo started", step, "touch never.txt"], "30m"))
    termination = tmp_path / "termination-log"
    env = {**os.environ, "PADDOCK_TERMINATION_LOG": str(termination), "TMPDIR": str(work)}
    with subprocess.Popen(
        ["bash", str(script)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL
    ) as setup:
        logged = wait_for(
            lambda: next((p for p in work.glob("*/step.log") if "waiting" in p.read_text()), None),
            30,
            what="the step's output in its log",
        )
        (logged.parent / "never").write_text("time is up\n")
        assert setup.wait(timeout=30) == 124
    lines = termination.read_text().splitlines()
    assert lines[0] == "setup step timed out after 1h: echo waiting; sleep 300; touch late.txt"
    assert "waiting" in lines[1:]
    assert not (tmp_path / "late.txt").exists()
    assert not (tmp_path / "never.txt").exists()


def test_default_timeout_applies_to_parallel_groups(tmp_path: Path) -> None:
    result = run_setup(tmp_path, [ParallelGroup(parallel=["sleep 30", "true"])], "1s")
    assert result.code == 124
    assert result.termination.startswith("setup step timed out after 1s: parallel: sleep 30 true")


@pytest.mark.parametrize("command", ["echo \"$(printf '%s' 'quoted')\"", "echo 'a  b' | tr -s ' '"])
def test_commands_are_passed_through_verbatim(tmp_path: Path, command: str) -> None:
    expected = subprocess.run(["bash", "-c", command], capture_output=True, text=True).stdout
    result = run_setup(tmp_path, [command])
    assert result.code == 0
    assert f"+ {command}\n{expected}" in result.stdout


PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
    "BKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
)


def test_a_failing_step_that_prints_secrets_reports_them_masked(tmp_path: Path) -> None:
    """The termination message is the pod's status, readable by whoever may read the pod: the
    secret env's values (as setup started: a step that changes the variable changes nothing)
    are masked whole and line by line, and so is a line of a PEM key printed alone."""
    steps = [
        "export TOKEN=changed-by-a-step",
        'echo "token=$ORIGINAL"; printf "%s" "$KEY"; echo; sed -n 2p <<< "$KEY"; exit 3',
    ]
    secrets = {"TOKEN": "tok-0123456789", "ORIGINAL": "tok-0123456789", "KEY": PEM}
    result = run_setup(tmp_path, steps, PADDOCK_SECRET_ENV="TOKEN KEY", **secrets)
    assert result.code == 3
    assert "setup step failed" in result.termination
    assert "token=[redacted]" in result.termination
    for line in PEM.splitlines()[1:3]:
        assert line not in result.termination
    assert "tok-0123456789" not in result.termination
    assert "tok-0123456789" not in result.stdout


def test_the_container_log_masks_secrets_as_the_run_log_does(tmp_path: Path) -> None:
    """The container log is readable by whoever may read pod logs (the built-in ``view``
    role): a step's output, a parallel group's and the failure report come out masked in
    every form the run log masks (whole, a PEM key's lines, URL-encoded, base64 at any
    alignment), and the other output and the exit code as they were."""
    token = "s3cret/token+value=1"
    steps: list[Step] = [
        'echo "plain $TOKEN"; printf "%s" "$KEY" | sed -n 3p',
        'echo "url $ENCODED"',
        ParallelGroup(parallel=['printf "x%s" "$TOKEN" | base64 -w0; echo', "echo untouched"]),
        "printf 'no newline at the end %s' \"$TOKEN\"; exit 4",
    ]
    encoded = quote(token, safe="")  # not a secret env: masked as a form of TOKEN
    result = run_setup(
        tmp_path, steps, PADDOCK_SECRET_ENV="TOKEN KEY", TOKEN=token, KEY=PEM, ENCODED=encoded
    )
    assert result.code == 4
    assert encoded not in result.stdout
    assert token not in result.stdout
    assert PEM.splitlines()[2] not in result.stdout
    assert "plain [redacted]" in result.stdout
    assert "url [redacted]" in result.stdout
    assert base64.b64encode(f"x{token}".encode()).decode()[4:20] not in result.stdout
    assert "[1] untouched" in result.stdout
    assert "no newline at the end [redacted]" in result.stdout
    assert "setup step failed" in result.stdout + result.termination


def test_the_scripts_masked_forms_are_the_run_logs(tmp_path: Path) -> None:
    """The forms a script masks, worked out by bash from its env, are exactly those the
    operator's scrubber masks in the run log (``scrubbing.variants``)."""
    values = [
        "tok-0123456789", "abc", "short", "with space and+plus/slash?", "é-ünïcode-válue",
        PEM, "  padded-secret-value \n", "line-one-long-enough\r\nline-two-long-enough",
        # as a JSON string holds them: a service account's key, quotes, a tab, a bell
        '{"private_key": "' + PEM.replace("\n", "\\n") + '"}\n', 'q"uo\\te', "ta\tb\x07-x",
    ]  # fmt: skip
    env = {f"S{i}": value for i, value in enumerate(values)}
    env["db.password"] = "dotted-name-secret"  # a name bash cannot expand, as env holds it
    values.append(env["db.password"])
    listed = subprocess.run(
        ["bash", "-c", SCRUB_FUNCTIONS + 'printf "%s\\0" "${_paddock_forms[@]}"'],
        env={**os.environ, **env, "PADDOCK_SECRET_ENV": " ".join(env)},
        capture_output=True,
        check=True,
    ).stdout
    forms = [form.decode() for form in listed.split(b"\0")[:-1]]
    assert set(forms) == set().union(*(variants(value) for value in values))
    assert [len(form) for form in forms] == sorted(map(len, forms), reverse=True)


def test_without_secret_env_the_report_is_the_output_as_printed(tmp_path: Path) -> None:
    result = run_setup(tmp_path, ["echo 'a  [x] & b\\n'; exit 1"])
    assert result.termination.splitlines()[1:] == ["a  [x] & b\\n"]


def test_a_daemon_a_step_leaves_keeps_no_masked_setup_from_ending(tmp_path: Path) -> None:
    """A step that starts a daemon which lets go of its output (as a daemon does) ends, and so
    does setup, its log masked: the daemon holds nothing of the log."""
    # A bash subshell, which keeps the copies bash saved of the shell's descriptors.
    daemon = "( (sleep 300; :) > /dev/null 2>&1 < /dev/null 3>&- & echo $! > daemon.pid)"
    steps = [f'{daemon}; echo "started $TOKEN"']
    try:
        result = run_setup(tmp_path, steps, PADDOCK_SECRET_ENV="TOKEN", TOKEN="tok-0123456789")
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "daemon.pid").read_text()), signal.SIGKILL)
    assert result.code == 0
    assert "started [redacted]" in result.stdout
    assert "setup complete" in result.stdout


def test_a_step_that_ignores_term_is_killed_at_its_timeout(tmp_path: Path) -> None:
    """The watchdog sends KILL after TERM (it does not stop itself with its own TERM): setup
    ends (the shell, which waited on the step, is killed with it), long before the step
    would have, and says why."""
    step = SetupCommand(run="sh -c 'trap \"\" TERM; sleep 300'", timeout="1s")
    result = run_setup(tmp_path, [step])
    assert result.code == -signal.SIGKILL
    assert "timed out after 1s" in result.termination


MASKED_TEXT = [
    "plain tok-0123456789 here",
    "twice tok-0123456789tok-0123456789",
    "regex chars a.b*c[d]^$\\/&x and a.b*c[d]^$\\/&x",
    "partial tok-01234 and é-ünïcode-válue",
    "no newline at the end tok-0123456789",
]


def test_the_fast_masker_masks_as_the_line_masker_does(tmp_path: Path) -> None:
    """GNU sed, where there is one, masks as the bash masker does, byte for byte."""
    env = {
        **os.environ,
        "PADDOCK_SECRET_ENV": "A B C",
        "A": "tok-0123456789",
        "B": "a.b*c[d]^$\\/&x",
        "C": "é-ünïcode-válue",
    }
    text = "\n".join(MASKED_TEXT)
    outputs = []
    for masker in (f'_paddock_mask_stream "{tmp_path}/sed"', "_paddock_mask_lines"):
        done = subprocess.run(
            ["bash", "-c", SCRUB_FUNCTIONS + masker],
            input=text.encode(),
            env=env,
            capture_output=True,
            check=True,
        )
        outputs.append(done.stdout.decode())
    assert outputs[0] == outputs[1]
    assert "tok-0123456789" not in outputs[0]
    assert "a.b*c[d]" not in outputs[0]
    assert outputs[0].endswith("no newline at the end [redacted]")
    assert (tmp_path / "sed").read_text().count("s/") >= 3  # (the sed masker did the work)
