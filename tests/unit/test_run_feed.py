"""A run's stream: the follower (``data/gate/follow.mjs``, run here with the real node on a
directory standing for the run's) and what the operator keeps of its frames (``Feed``)."""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from paddock.agentruns.feed import Feed
from paddock.render import gate_scripts

FOLLOWER = Path(gate_scripts.__file__).parent.parent / "data" / "gate" / "follow.mjs"
NONCE = "n" * 64


def _frame(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _journal(name: str, at: int, data: bytes) -> bytes:
    return _frame(k="j", j=name, at=at, b=base64.b64encode(data).decode())


class Sent:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def send(self, text: str) -> bool:
        self.lines.append(text)
        return True

    def close(self) -> None:
        pass


def test_frames_in_order_make_the_poll_and_an_overlap_is_taken_once() -> None:
    feed = Feed({"stdout": 10, "files": 0}, lambda urgent: None)
    feed.line(_journal("stdout", 10, b"one\n"))
    feed.line(_journal("stdout", 12, b"e\ntwo\n"))  # sent again in part: the rest is new
    poll = feed.poll({"stdout": 10, "files": 0})
    assert poll is not None
    assert poll.stdout == b"one\ntwo\n"
    assert poll.wrapper_alive


def test_a_gap_in_a_journal_stops_the_feed_saying_anything() -> None:
    feed = Feed({}, lambda urgent: None)
    feed.line(_journal("stdout", 5, b"late\n"))
    assert feed.poll({}) is None
    assert not feed.following


def test_the_completion_waits_for_every_journal_byte_before_it() -> None:
    feed = Feed({}, lambda urgent: None)
    record = base64.b64encode(f"0 {NONCE}\n".encode()).decode()
    feed.line(_frame(k="exit", exit=record, ends={"stdout": 4, "files": 0}))
    poll = feed.poll({})
    assert poll is not None
    assert poll.completion is None
    feed.line(_journal("stdout", 0, b"end\n"))
    poll = feed.poll({})
    assert poll is not None
    assert poll.completion is not None
    assert (poll.completion.exit_code, poll.stdout) == (0, b"end\n")


def test_a_stale_wrapper_beat_or_a_lost_stream_is_asked_of_the_sandbox_itself() -> None:
    feed = Feed({}, lambda urgent: None)
    feed.line(_frame(k="wrapper", stale=True))
    assert feed.poll({}) is None
    assert feed.following
    feed.line(_frame(k="wrapper", stale=False))
    assert feed.poll({}) is not None
    feed.ended(None, "")
    assert feed.poll({}) is None
    assert not feed.following


def test_an_ack_lets_the_held_bytes_go_and_tells_the_follower() -> None:
    feed, sent = Feed({}, lambda urgent: None), Sent()
    feed.channel = sent
    feed.line(_journal("stdout", 0, b"a\nb\n"))
    feed.ack({"stdout": 2, "files": 0})
    poll = feed.poll({"stdout": 2, "files": 0})
    assert poll is not None
    assert poll.stdout == b"b\n"
    assert sent.lines == ["ack 2 0\n"]


def test_an_answered_request_no_longer_waits_and_only_the_servers_ids_are_sent() -> None:
    feed, sent = Feed({}, lambda urgent: None), Sent()
    feed.channel = sent
    feed.line(_frame(k="gate", id="1-1", b=base64.b64encode(b"{}").decode()))
    feed.line(_frame(k="gate", id="../x", b=""))
    gate = feed.gate("")
    assert gate is not None
    assert list(gate.requests) == ["1-1"]
    assert feed.answer({"1-1": "allow", "../x": "allow"})
    assert sent.lines == [f"answer 1-1 {base64.b64encode(b'allow').decode()}\n"]
    gate = feed.gate("")
    assert gate is not None
    assert gate.requests == {}


# -- the follower itself -----------------------------------------------------------------------


class Follower:
    def __init__(self, run: Path, private: Path, *offsets: int) -> None:
        at = [str(o) for o in offsets] or ["0", "0"]
        argv = ["node", str(FOLLOWER), str(run), str(private), *at, "run"]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pending = b""

    def frames(self, until: Any, timeout: float = 10) -> list[dict[str, Any]]:
        """Frames until one matches ``until`` (which is the last returned)."""
        assert self.process.stdout is not None
        got: list[dict[str, Any]] = []
        fd, deadline = self.process.stdout.fileno(), time.monotonic() + timeout
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                got.append(json.loads(line))
                if until(got[-1]):
                    return got
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            assert ready, f"no frame matching in {timeout}s; got {got}"
            chunk = os.read(fd, 1 << 20)
            assert chunk, f"the follower ended; got {got}"
            self.pending += chunk

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode())
        self.process.stdin.flush()


@pytest.fixture
def run_dirs(tmp_path: Path) -> tuple[Path, Path]:
    run, private = tmp_path / "run", tmp_path / "private"
    run.mkdir()
    private.mkdir()
    return run, private


def _journal_bytes(frames: list[dict[str, Any]], name: str) -> bytes:
    return b"".join(base64.b64decode(f["b"]) for f in frames if f.get("j") == name)


def test_the_follower_pushes_lines_as_they_are_written_then_the_completion(
    run_dirs: tuple[Path, Path],
) -> None:
    run, private = run_dirs
    (run / "stdout").write_bytes(b"first\n")
    (run / "files").write_bytes(b"")
    follower = Follower(run, private)
    try:
        got = follower.frames(lambda f: f.get("j") == "stdout")
        assert _journal_bytes(got, "stdout") == b"first\n"
        with (run / "stdout").open("ab") as out:
            out.write(b"second\n")
        got = follower.frames(lambda f: f.get("j") == "stdout")
        assert got[-1]["at"] == 6
        assert _journal_bytes(got, "stdout") == b"second\n"
        (run / "exit").write_text(f"3 {NONCE}\n")
        got = follower.frames(lambda f: f.get("k") == "exit")
        assert base64.b64decode(got[-1]["exit"]) == f"3 {NONCE}\n".encode()
        assert got[-1]["ends"] == {"stdout": 13, "files": 0}
    finally:
        follower.process.kill()


def test_the_follower_sends_no_more_than_its_window_past_the_last_ack(
    run_dirs: tuple[Path, Path],
) -> None:
    run, private = run_dirs
    (run / "stdout").write_bytes(b"x" * (3 << 20))
    (private / "requests").mkdir()
    follower = Follower(run, private, 100, 0)
    try:
        sent = [0]

        def windowful(frame: dict[str, Any]) -> bool:
            sent[0] += len(base64.b64decode(frame.get("b", ""))) if frame.get("j") else 0
            return sent[0] >= 1 << 20

        got = follower.frames(windowful)
        # A request comes after: a follower past its window would send journal bytes first.
        (private / "requests" / "1-1.req").write_text("{}")
        got += follower.frames(lambda f: f.get("k") == "gate")
        assert len(_journal_bytes(got, "stdout")) == 1 << 20  # from 100, a window's worth
        follower.send(f"ack {(1 << 20) + 100} 0\n")
        got = follower.frames(lambda f: f.get("j") == "stdout")
        assert got[-1]["at"] == (1 << 20) + 100  # on from the ack, nothing sent twice
    finally:
        follower.process.kill()


def test_a_journal_that_is_a_link_is_never_read(run_dirs: tuple[Path, Path]) -> None:
    """The agent may swap a journal for a link to a file of the sidecar's (its gate's
    requests, say): the follower refuses it, and the run is polled by exec instead."""
    run, private = run_dirs
    secret = private / "requests.txt"
    secret.write_text("the sidecar's own\n")
    (run / "stdout").symlink_to(secret)
    follower = Follower(run, private)
    try:
        got = follower.frames(lambda f: f.get("k") == "refused")
        assert _journal_bytes(got, "stdout") == b""
        assert follower.process.wait(10) == 0
    finally:
        follower.process.kill()


def test_a_later_follower_of_the_run_stops_the_one_before(run_dirs: tuple[Path, Path]) -> None:
    run, private = run_dirs
    first = Follower(run, private)
    try:
        first.frames(lambda f: f.get("k") == "wrapper")
        second = Follower(run, private)
        try:
            assert first.process.wait(10) == -signal.SIGTERM
            second.frames(lambda f: f.get("k") == "wrapper")
        finally:
            second.process.kill()
    finally:
        first.process.kill()


def test_a_completion_record_written_again_is_sent_again(run_dirs: tuple[Path, Path]) -> None:
    """The agent may write a record before the wrapper does: the wrapper's is sent too."""
    run, private = run_dirs
    (run / "exit").write_text("0 forged\n")
    follower = Follower(run, private)
    try:
        follower.frames(lambda f: f.get("k") == "exit")
        (run / "exit").write_text(f"1 {NONCE}\n")
        got = follower.frames(lambda f: f.get("k") == "exit")
        assert base64.b64decode(got[-1]["exit"]) == f"1 {NONCE}\n".encode()
    finally:
        follower.process.kill()


def test_the_run_directory_swapped_for_a_link_is_still_read_where_it_was(
    run_dirs: tuple[Path, Path],
) -> None:
    run, private = run_dirs
    (run / "stdout").write_bytes(b"one\n")
    follower = Follower(run, private)
    try:
        follower.frames(lambda f: f.get("j") == "stdout")
        elsewhere = private / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "stdout").write_bytes(b"one\nnot the run's\n")
        run.rename(run.with_name("moved"))
        run.symlink_to(elsewhere)
        with run.with_name("moved").joinpath("stdout").open("ab") as out:
            out.write(b"two\n")
        got = follower.frames(lambda f: f.get("j") == "stdout")
        assert _journal_bytes(got, "stdout") == b"two\n"  # the directory it opened, moved
    finally:
        follower.process.kill()


def test_a_run_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real, private = tmp_path / "real", tmp_path / "private"
    real.mkdir()
    private.mkdir()
    (real / "stdout").write_bytes(b"x\n")
    (tmp_path / "run").symlink_to(real)
    follower = Follower(tmp_path / "run", private)
    try:
        got = follower.frames(lambda f: f.get("k") == "refused")
        assert _journal_bytes(got, "stdout") == b""
    finally:
        follower.process.kill()


def test_gate_requests_come_sixteen_a_second_and_none_waits_behind_unanswered_ones(
    run_dirs: tuple[Path, Path],
) -> None:
    """An agent's flood of requests reaches the operator no faster than an exec poll brought
    them (16 a second); requests nobody answers (a person's to decide) hold no other back."""
    run, private = run_dirs
    requests = private / "requests"
    requests.mkdir()
    for i in range(20):
        (requests / f"1-{i:02d}.req").write_text("{}")
    started = time.monotonic()
    follower = Follower(run, private)
    try:
        sent = [0]

        def gate_frames(count: int) -> Any:
            def counted(frame: dict[str, Any]) -> bool:
                sent[0] += frame.get("k") == "gate"
                return sent[0] == count

            return counted

        first = follower.frames(gate_frames(16))
        rest = follower.frames(gate_frames(17))
        waited = time.monotonic() - started  # (a lower bound: load only makes it longer)
        rest += follower.frames(gate_frames(20))
        ids = [f["id"] for f in first + rest if f.get("k") == "gate"]
        assert ids == [f"1-{i:02d}" for i in range(20)]  # none answered, none held back
        assert waited >= 1.0  # the 17th waited for the first of the 16 to be a second old
    finally:
        follower.process.kill()
