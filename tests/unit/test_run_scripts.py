"""The launch, wrapper, poll and signal scripts, run by a real bash on real files: detached
runs, the completion record and its nonce, file events, git changes, killing a process group.
The harness script is the run's control file, which the sidecar's prepare script writes."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from paddock.render import gate_scripts
from paddock.render import run_scripts as rs
from support import hostile_git
from support.waiting import wait_for

NONCE = "9f" * 32


@dataclass
class Sandbox:
    """A workspace, a run dir and the sidecar's dirs standing in for the pod's volumes."""

    workspace: Path
    run_dir: Path
    control_dir: Path
    gate_dir: Path

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PADDOCK_WORKSPACE": str(self.workspace),
            "PADDOCK_RUN_DIR": str(self.run_dir),
            "PADDOCK_CONTROL_DIR": str(self.control_dir),
            "PADDOCK_GATE_DIR": str(self.gate_dir),
            "PADDOCK_FILE_POLL_SECONDS": "0.1",
        }

    def prepare(self, script: str, run: str = "r1") -> None:
        """What the operator has the sidecar do first: the harness script a control file."""
        subprocess.run(
            gate_scripts.prepare_argv(run, gated=False), env=self.env(), timeout=30, check=True,
            input=gate_scripts.prepare_payload({"harness": script}, gated=False), text=True,
        )  # fmt: skip

    def launch(
        self,
        script: str,
        env: dict[str, str] | None = None,
        run: str = "r1",
        secret: dict[str, str] | None = None,
        container: dict[str, str] | None = None,
    ) -> str:
        """Launch ``script`` with the run's ``env`` and ``secret`` variables; ``container``:
        more of the container's env (``PADDOCK_SECRET_ENV`` naming its secret ones)."""
        if not (self.control_dir / "runs" / run).exists():
            self.prepare(script, run)
        payload = rs.launch_payload(NONCE, env or {}, "the prompt", secret)
        done = subprocess.run(
            rs.launch_argv(run), input=payload, capture_output=True, text=True,
            env=self.env() | (container or {}), timeout=30, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def poll(self, run: str = "r1", stdout: int = 0, files: int = 0) -> rs.Poll:
        done = subprocess.run(
            rs.poll_argv(run, stdout, files, 1 << 20), capture_output=True, text=True,
            env=self.env(), timeout=30, check=True,
        )  # fmt: skip
        return rs.parse_poll(done.stdout)

    def finished(self, run: str = "r1") -> rs.Poll:
        return wait_for(lambda: (p := self.poll(run)).completion and p, 30, what="completion")


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return Sandbox(workspace, tmp_path / "run", tmp_path / "control", tmp_path / "gate")


def test_a_run_is_launched_once_and_completes_with_its_nonce(sandbox: Sandbox) -> None:
    assert sandbox.launch("echo out; echo err >&2; exit 3") == rs.STARTED
    assert sandbox.launch("echo second") == rs.ALREADY_STARTED
    poll = sandbox.finished()
    assert poll.completion == rs.Completion(3, NONCE)
    assert poll.stdout == b"out\n"
    assert poll.stderr_tail == "err\n"


def test_the_nonce_is_in_no_file_and_no_argv_or_environment_of_the_harness(
    sandbox: Sandbox,
) -> None:
    probe = (
        'cat /proc/$PPID/cmdline /proc/$PPID/environ /proc/$$/environ | tr "\\0" "\\n"; '
        'grep -rl . "$PADDOCK_RUN" 2>/dev/null | xargs cat; env'
    )
    sandbox.launch(probe)
    poll = sandbox.finished()
    assert NONCE not in poll.stdout.decode()
    assert poll.completion is not None
    files = [p for p in (sandbox.run_dir / "r1").iterdir() if p.name != "exit"]
    assert all(NONCE not in p.read_text(errors="replace") for p in files)


def test_a_forged_record_is_overwritten_by_the_real_one(sandbox: Sandbox) -> None:
    sandbox.launch('echo "0 forged" > "$PADDOCK_RUN/exit"; exit 1')
    poll = wait_for(
        lambda: (p := sandbox.poll()).completion and p.completion.nonce == NONCE and p, 30,
        what="the wrapper's record",
    )  # fmt: skip
    assert poll.completion == rs.Completion(1, NONCE)


def test_secrets_reach_the_harness_env_not_its_argv(sandbox: Sandbox) -> None:
    sandbox.launch('printf "%s" "$API_KEY"; cat /proc/$$/cmdline', env={"API_KEY": "k-123 x"})
    assert sandbox.finished().stdout.startswith(b"k-123 x")
    assert b"k-123" not in sandbox.finished().stdout[len("k-123 x") :]


def test_file_events_and_git_changes(sandbox: Sandbox) -> None:
    ws = sandbox.workspace
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "tracked.txt").write_text("v1\n")
    (ws / "gone.txt").write_text("bye\n")
    (ws / ".gitignore").write_text("node_modules/\n")
    git = ["git", "-C", str(ws), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    script = (
        "echo new > new.txt; mkdir -p node_modules; echo x > node_modules/ignored; "
        "rm gone.txt; sleep 0.5; echo v2 > tracked.txt; sleep 0.5"
    )
    sandbox.launch(script)
    poll = sandbox.finished()
    lines = set(poll.files.decode().splitlines())
    assert {"created\tnew.txt", "deleted\tgone.txt", "changed\ttracked.txt"} <= lines
    assert not any("node_modules" in line or ".git/" in line for line in lines)
    changes = {path: status for status, path in rs.parse_changes(poll.changes)}
    assert changes == {"new.txt": "untracked", "gone.txt": "deleted", "tracked.txt": "modified"}
    assert "+v2" in poll.diff


def test_a_runs_conversations_are_masked_and_no_part_of_its_changes(sandbox: Sandbox) -> None:
    """What the CLI wrote in the sessions store this run has the container's and the run's
    secret values (and their encodings) overwritten with as many '*': a binary file keeps its
    size and its other bytes; a file of an earlier run is not touched. The store is in no file
    event and no change."""
    ws = sandbox.workspace
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    git = ["git", "-C", str(ws), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "base"], check=True)
    store = ws / ".paddock" / "sessions" / "claude"
    store.mkdir(parents=True)
    earlier = store / "earlier.jsonl"
    earlier.write_text("an earlier run's, left as it is: sk-run-0123456789\n")
    stamp = earlier.stat().st_mtime_ns
    script = (
        'cd .paddock/sessions/claude && printf \'{"out":"%s and %s"}\\n\' "$RUN_KEY" "$WS_KEY"'
        " > t.jsonl && printf '%s' \"$RUN_KEY\" | base64 >> t.jsonl"
        ' && printf \'a\\0b%s\\0c\' "$RUN_KEY" > t.db && echo work > "$PADDOCK_WORKSPACE/w.txt"'
        # What the agent could do to keep it: date it back, link it from elsewhere.
        ' && printf %s "$RUN_KEY" > old.jsonl && touch -d 2001-01-01 old.jsonl'
        ' && printf %s "$RUN_KEY" > ../../../kept && ln ../../../kept linked'
    )
    sandbox.launch(
        script,
        secret={"RUN_KEY": "sk-run-0123456789"},
        container={"WS_KEY": "ws-secret-abcdefgh", "PADDOCK_SECRET_ENV": "WS_KEY"},
    )
    poll = sandbox.finished()
    assert poll.completion is not None
    assert poll.completion.exit_code == 0
    text = (store / "t.jsonl").read_text()
    assert "sk-run" not in text
    assert "ws-secret" not in text
    assert text.startswith('{"out":"' + "*" * 17 + " and " + "*" * 18 + '"}\n')
    assert "c2stcnVuLTAxMjM0NTY3ODk" not in text  # base64 of it
    assert (store / "t.db").read_bytes() == b"a\0b" + b"*" * 17 + b"\0c"
    assert (store / "old.jsonl").read_text() == "*" * 17  # by its ctime, which stays
    assert not (store / "linked").exists()  # a file of two links: not masked, removed
    assert earlier.stat().st_mtime_ns == stamp
    assert b".paddock" not in poll.files
    assert rs.parse_changes(poll.changes) == [("untracked", "kept"), ("untracked", "w.txt")]


def test_the_wrappers_git_runs_nothing_the_agent_configured_and_hides_no_change(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ws, home, marks = sandbox.workspace, tmp_path / "home", tmp_path / "marks"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "tracked.txt").write_text("v1\n")
    git = ["git", "-C", str(ws), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    # What the agent leaves: a change, a new file, one more staged in its own index, and
    # its repository and HOME naming a program at every place git takes one from.
    (ws / "tracked.txt").write_text("v2\n")
    (ws / "new.txt").write_text("new\n")
    (ws / "staged.txt").write_text("staged\n")
    subprocess.run([*git, "add", "staged.txt"], check=True)
    hostile_git.arm(ws, home, marks)
    env = {**sandbox.env(), "HOME": str(home)}
    sandbox.prepare("exit 0")
    payload = rs.launch_payload(NONCE, {}, "the prompt")
    subprocess.run(rs.launch_argv("r1"), input=payload, text=True, env=env, check=True)
    poll = sandbox.finished()
    assert hostile_git.ran(marks) == []
    changes = {path: status for status, path in rs.parse_changes(poll.changes)}
    assert changes == {"tracked.txt": "modified", "new.txt": "untracked",
                       "staged.txt": "untracked", ".gitattributes": "untracked"}  # fmt: skip
    assert "-v1\n+v2" in poll.diff
    # The same repository, read by git as the wrapper once did: its programs run.
    subprocess.run(["git", "status"], cwd=ws, env={**env, "GIT_PAGER": ""},
                   capture_output=True, check=False)  # fmt: skip
    assert any(mark.endswith("core.fsmonitor") for mark in hostile_git.ran(marks))


def test_signal_kills_the_whole_process_group_and_the_record_is_written(
    sandbox: Sandbox,
) -> None:
    sandbox.launch("sleep 300 & echo $! > child.pid; sleep 300")
    pid_file = sandbox.workspace / "child.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, what="child pid")
    child = int(pid_file.read_text())
    subprocess.run(rs.signal_argv("r1", "TERM"), env=sandbox.env(), check=True, timeout=30)
    poll = sandbox.finished()
    assert poll.completion is not None
    assert poll.completion.exit_code == 143
    wait_for(lambda: not Path(f"/proc/{child}").exists(), 10, what="the background child gone")


def test_poll_reads_from_offsets_and_reports_missing_runs(sandbox: Sandbox) -> None:
    assert sandbox.poll("never").missing
    sandbox.launch("printf 'abc\\ndef\\n'")
    sandbox.finished()
    assert sandbox.poll(stdout=4).stdout == b"def\n"


def test_a_missing_workspace_ends_the_run_with_127(sandbox: Sandbox) -> None:
    sandbox.workspace.rmdir()
    sandbox.launch("echo never")
    poll = sandbox.finished()
    assert poll.completion is not None
    assert poll.completion.exit_code == 127
    assert "is not there" in poll.stderr_tail


def test_a_run_its_sidecar_did_not_prepare_is_not_launched(sandbox: Sandbox) -> None:
    done = subprocess.run(
        rs.launch_argv("r1"), input=rs.launch_payload(NONCE, {}, "p"), capture_output=True,
        text=True, env=sandbox.env(), timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "control files are not there" in done.stderr
    assert not (sandbox.run_dir / "r1").exists()


@pytest.mark.parametrize("cut", ["before the end", "before the prompt", "before the nonce"])
def test_a_launch_whose_payload_is_cut_short_starts_nothing_and_can_be_launched_again(
    sandbox: Sandbox, cut: str
) -> None:
    """Its operator killed mid-exec: the run is not there (so it counts as never launched),
    and the next launch starts it whole."""
    sandbox.prepare("echo whole")
    payload = rs.launch_payload(NONCE, {"KEY": "k"}, "the prompt").splitlines(keepends=True)
    kept = {"before the end": -1, "before the prompt": -2, "before the nonce": 0}[cut]
    done = subprocess.run(
        rs.launch_argv("r1"), input="".join(payload[:kept]), capture_output=True, text=True,
        env=sandbox.env(), timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "cut short" in done.stderr
    assert sandbox.poll().missing
    assert sandbox.launch("echo whole") == rs.STARTED
    assert sandbox.finished().stdout == b"whole\n"


def test_the_secret_env_a_container_started_with_is_read_back_whole() -> None:
    """What a rotation leaves in a running pod: the values its processes hold."""
    pem = "-----BEGIN KEY-----\nabc def\n-----END KEY-----\n"
    env = {**os.environ, "PADDOCK_SECRET_ENV": "TOKEN KEY GONE", "TOKEN": "t-1", "KEY": pem}
    done = subprocess.run(
        rs.started_secrets_argv(), capture_output=True, text=True, env=env, timeout=30, check=True
    )
    assert rs.parse_started_secrets(done.stdout) == ["t-1", pem]  # an unset one adds nothing
