"""The gate's channel, with the real parts: the sidecar's prepare, poll, answer and close
scripts run by a real bash, the gate server and client run by a real node, over a real unix
socket. A hook's request in, an exit code out; the operator's answer goes back on the
request's own connection only. Framing: the request's length, a newline, the request."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock.api.agentrun import AgentRunSpec
from paddock.harness.base import gate_command
from paddock.render import gate_scripts as gs
from support.gate_channel import Channel, outcome, prepared, request
from support.waiting import wait_for


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[Channel]:
    with prepared(tmp_path) as channel:
        yield channel


def raw_answer(raw: socket.socket) -> bytes:
    return b"".join(iter(lambda: raw.recv(4096), b""))


def test_an_allowed_request_is_answered_on_its_own_connection(channel: Channel) -> None:
    client = channel.ask(request("echo hi"))
    ((request_id, raw),) = channel.waiting().items()
    assert json.loads(raw)["tool_input"]["command"] == "echo hi"
    channel.answer({request_id: "allow\n"})
    code, out, err = outcome(client)
    assert (code, err) == (0, "")
    # Claude Code's tool is allowed by the hook's answer alone (not by its permission rules).
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert channel.poll().requests == {}  # an answered request is not brought again


def test_a_denial_blocks_with_the_message_on_stderr(channel: Channel) -> None:
    client = channel.ask(request("rm -rf /"), harness="codex")
    channel.answer(dict.fromkeys(channel.waiting(), "deny\nPaddock policy: no.\n"))
    assert outcome(client) == (2, "", "Paddock policy: no.\n")


def test_each_answer_reaches_only_the_request_it_answers(channel: Channel) -> None:
    first = channel.ask(request("echo one"), harness="gemini")
    second = channel.ask(request("echo two"), harness="gemini")
    waiting = channel.waiting(2)
    by_command = {json.loads(raw)["tool_input"]["command"]: i for i, raw in waiting.items()}
    channel.answer({by_command["echo two"]: "allow\n"})
    assert outcome(second)[0] == 0
    assert first.poll() is None  # still waiting: nobody answered it
    assert list(channel.poll().requests) == [by_command["echo one"]]
    channel.answer({by_command["echo one"]: "deny\nno\n"})
    assert outcome(first)[0] == 2


def test_no_answer_in_time_is_a_refusal_and_withdraws_the_request(channel: Channel) -> None:
    client = channel.ask(request("echo hi"), seconds=1)
    code, _, err = outcome(client)
    assert code == 2
    assert "no decision in time" in err
    wait_for(lambda: channel.poll().requests == {}, 30, what="the request withdrawn")


def test_a_client_that_goes_away_mid_request_withdraws_it(channel: Channel) -> None:
    client = channel.ask(request("echo hi"))
    (request_id,) = channel.waiting()
    client.kill()
    client.wait(timeout=30)
    wait_for(lambda: channel.poll().requests == {}, 30, what="the request withdrawn")
    channel.answer({request_id: "allow\n"})  # too late: written nowhere
    assert not (channel.requests / f"{request_id}.ans").exists()


LIMIT = 65536


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        (f"{LIMIT + 1}\n".encode(), b"over 64 KiB"),  # refused on its length, before its bytes
        (b"12x\n{}", b"does not start with its length"),
        (b"{" * 40, b"does not start with its length"),
    ],
)
def test_a_request_too_big_or_unframed_is_refused_at_once(
    channel: Channel, sent: bytes, why: bytes
) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(channel.control / "gate.sock"))
        raw.settimeout(30)
        raw.sendall(sent)
        answer = raw_answer(raw)
    assert answer.startswith(b"deny\n")
    assert why in answer
    assert channel.poll().requests == {}


def test_the_client_refuses_a_request_too_big_itself(channel: Channel) -> None:
    code, _, err = outcome(channel.ask(b"y" * (LIMIT + 1)))
    assert code == 2
    assert "over 64 KiB" in err


def test_a_request_in_pieces_is_one_request(channel: Channel) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(channel.control / "gate.sock"))
        raw.settimeout(30)
        body = request("echo in pieces")
        framed = f"{len(body)}\n".encode() + body
        for start in range(0, len(framed), 7):
            raw.sendall(framed[start : start + 7])
        ((request_id, seen),) = channel.waiting().items()
        assert seen == body
        channel.answer({request_id: "deny\nnot this one\n"})
        assert raw_answer(raw) == b"deny\nnot this one\n"


def test_a_client_gone_mid_request_leaves_no_request(channel: Channel) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(channel.control / "gate.sock"))
        raw.sendall(b"100\n{partial")
    client = channel.ask(request("echo after"))
    ((_, seen),) = channel.waiting().items()  # only the whole one
    assert json.loads(seen)["tool_input"]["command"] == "echo after"
    client.kill()
    client.wait(timeout=30)


def test_an_answer_for_an_id_the_server_did_not_make_is_not_written(channel: Channel) -> None:
    client = channel.ask(request("echo hi"))
    waiting = channel.waiting()
    payload = "../../escape YWxsb3cK\n" + gs.answer_payload(dict.fromkeys(waiting, "allow\n"))
    payload += "9-9 YWxsb3cK\n"  # after the end line: not read
    channel.answer({}, payload)
    assert outcome(client)[0] == 0
    assert not list(channel.requests.parent.parent.parent.rglob("escape*"))
    assert not (channel.requests / "9-9.ans").exists()
    assert gs.answer_payload({"../x": "allow\n", "1-2": "allow\n"}) == "1-2 YWxsb3cK\nend -\n"


def test_a_stopped_server_refuses_every_request(channel: Channel) -> None:
    assert not channel.poll().server_stopped
    os.kill(channel.server_pid(), signal.SIGKILL)
    wait_for(lambda: channel.poll().server_stopped, 30, what="the server seen gone")
    code, _, err = outcome(channel.ask(request("echo hi")))
    assert code == 2
    assert "cannot be reached" in err


def test_a_server_that_stops_beating_is_seen_as_stopped() -> None:
    assert gs.parse_poll("server 2\n").server_stopped is False
    assert gs.parse_poll(f"server {gs.STALE_SECONDS + 1}\n").server_stopped
    assert gs.parse_poll("missing\n").server_stopped
    assert gs.parse_poll("server gone\n").server_stopped
    assert gs.parse_poll("").server_stopped  # no answer about the server at all


def test_the_hooks_command_blocks_when_its_client_is_killed(channel: Channel) -> None:
    """The ``|| exit 2``: a client killed by a signal (the agent's user can signal it) gives
    the CLI a block, not the failure that Codex and Gemini CLI let a command through on."""
    spec = AgentRunSpec.model_validate({"sandboxRef": {"name": "b"}, "harness": "codex",
                                        "prompt": "p"})  # fmt: skip
    env = {"PATH": os.environ["PATH"], "PADDOCK_CONTROL": str(channel.control)}
    hook = subprocess.Popen(["bash", "-c", gate_command("codex", spec)], env=env,
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert hook.stdin is not None
    hook.stdin.write(request("echo hi"))
    hook.stdin.close()
    channel.waiting()
    subprocess.run(["pkill", "-KILL", "-P", str(hook.pid), "node"], check=True, timeout=30)
    assert hook.wait(timeout=30) == 2


def test_the_client_runs_with_nothing_of_the_hooks_environment_but_path(
    channel: Channel, tmp_path: Path
) -> None:
    """What a .env file gave the CLI (Gemini CLI loads the workspace's) never runs in it."""
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.cjs"
    evil.write_text(f"require('fs').writeFileSync({json.dumps(str(marker))}, 'x')\n")
    spec = AgentRunSpec.model_validate({"sandboxRef": {"name": "b"}, "harness": "gemini",
                                        "prompt": "p"})  # fmt: skip
    env = {"PATH": os.environ["PATH"], "PADDOCK_CONTROL": str(channel.control),
           "NODE_OPTIONS": f"--require {evil}"}  # fmt: skip
    hook = subprocess.Popen(["bash", "-c", gate_command("gemini", spec)], env=env,
                            stdin=subprocess.PIPE)  # fmt: skip
    assert hook.stdin is not None
    hook.stdin.write(request("echo hi"))
    hook.stdin.close()
    channel.answer(dict.fromkeys(channel.waiting(), "allow\n"))
    assert hook.wait(timeout=30) == 0
    assert not marker.exists()


def test_every_waiting_request_is_brought_within_a_bounded_number_of_polls(
    channel: Channel,
) -> None:
    """500 requests wait for a person: each poll brings 16 and the next goes on after the
    last, so all are seen within 32 polls and the first 16 never hold the rest back."""
    ids = [f"1700000000-{n}" for n in range(500)]
    for request_id in ids:
        (channel.requests / f"{request_id}.req").write_text(f'{{"command": "{request_id}"}}')
    (channel.requests / f"{ids[3]}.ans").write_text("allow\n")  # answered: never brought again
    seen: list[str] = []
    after = ""
    for _ in range(-(-len(ids) // gs.MAX_REQUESTS)):
        poll = channel.poll(after=after)
        assert len(poll.requests) <= gs.MAX_REQUESTS
        seen += poll.requests
        after = gs.cursor(poll)
    assert set(seen) == set(ids) - {ids[3]}


def test_close_stops_the_server_and_removes_the_runs_files(channel: Channel) -> None:
    pid = channel.server_pid()
    channel.close()
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 30, what="the server stopped")
    assert not channel.control.exists()
    assert channel.poll().missing


def test_prepare_refuses_a_file_name_outside_the_control_directory(tmp_path: Path) -> None:
    env = {**os.environ, "PADDOCK_CONTROL_DIR": str(tmp_path / "c"),
           "PADDOCK_GATE_DIR": str(tmp_path / "g")}  # fmt: skip
    for name in ("../escape", "a/../../escape", "/abs"):
        done = subprocess.run(
            gs.prepare_argv("r1", gated=False), input=gs.prepare_payload({name: "x"}, gated=False),
            capture_output=True, text=True, env=env, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == 2, name
    assert not list(tmp_path.rglob("escape"))


def test_the_channel_works_where_the_sockets_full_path_is_over_the_limit(tmp_path: Path) -> None:
    """A unix socket's path holds at most 107 bytes (kwok's pods live deep in the host's
    tree): the server and the client name it from its own directory."""
    channel = Channel(tmp_path / ("deep-" * 25))
    assert len(str(channel.control / "gate.sock")) > 108
    assert channel.prepare().returncode == 0
    try:
        client = channel.ask(request("echo hi"))
        channel.answer(dict.fromkeys(channel.waiting(), "allow\n"))
        assert outcome(client)[0] == 0
    finally:
        channel.close()
