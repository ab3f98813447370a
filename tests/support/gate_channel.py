"""One gated run's gate channel with the real parts (the sidecar's scripts run by a real bash,
the gate server and client by a real node, over a real unix socket), for unit tests."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from paddock.render import gate_scripts as gs
from support.waiting import wait_for


def request(command: str) -> bytes:
    """A PreToolUse request as Claude Code writes it to its hook's stdin."""
    return json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": command}}).encode()  # fmt: skip


class Channel:
    """One gated run's channel: the control directory (the agent's view) and the sidecar's."""

    def __init__(self, tmp_path: Path) -> None:
        self.env = {
            **os.environ,
            "PADDOCK_CONTROL_DIR": str(tmp_path / "control"),
            "PADDOCK_GATE_DIR": str(tmp_path / "gate"),
        }
        self.control = tmp_path / "control" / "runs" / "r1"
        self.requests = tmp_path / "gate" / "runs" / "r1" / "requests"

    def prepare(self, files: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        files = files or {"harness": "true", "claude/settings.json": "{}"}
        payload = gs.prepare_payload(files, gated=True)
        return subprocess.run(
            gs.prepare_argv("r1", gated=True), input=payload, capture_output=True, text=True,
            env=self.env, timeout=30, check=False,
        )  # fmt: skip

    def ask(
        self, body: bytes, harness: str = "claude-code", seconds: int = 60
    ) -> subprocess.Popen[bytes]:
        """A hook running the client, as the agent's user would."""
        client = subprocess.Popen(
            ["node", str(self.control / gs.CLIENT), harness, str(seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert client.stdin is not None
        client.stdin.write(body)
        client.stdin.close()
        return client

    def poll(self, after: str = "") -> gs.GatePoll:
        done = subprocess.run(gs.poll_argv("r1", after), capture_output=True, text=True,
                              env=self.env, check=True, timeout=30)  # fmt: skip
        return gs.parse_poll(done.stdout)

    def waiting(self, count: int = 1) -> dict[str, bytes]:
        return wait_for(
            lambda: len((p := self.poll()).requests) == count and p.requests,
            30,
            what=f"{count} request(s) waiting",
        )

    def answer(self, answers: dict[str, str], payload: str | None = None) -> None:
        """As the operator's exec does: the payload written, stdin left open."""
        answering = subprocess.Popen(gs.answer_argv("r1"), stdin=subprocess.PIPE, text=True,
                                     env=self.env)  # fmt: skip
        assert answering.stdin is not None
        answering.stdin.write(gs.answer_payload(answers) if payload is None else payload)
        answering.stdin.flush()
        try:
            assert answering.wait(timeout=30) == 0
        finally:
            answering.stdin.close()

    def server_pid(self) -> int:
        return int((self.requests.parent / "server.pid").read_text())

    def close(self) -> None:
        subprocess.run(gs.close_argv("r1"), env=self.env, check=True, timeout=30)


@contextmanager
def prepared(tmp_path: Path, files: dict[str, str] | None = None) -> Iterator[Channel]:
    """A channel prepared with ``files`` (a Claude Code run's by default), closed after."""
    channel = Channel(tmp_path)
    done = channel.prepare(files)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == gs.PREPARED
    try:
        yield channel
    finally:
        channel.close()


def outcome(client: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    assert client.stdout is not None
    assert client.stderr is not None
    code = client.wait(timeout=30)
    return code, client.stdout.read().decode(), client.stderr.read().decode()
