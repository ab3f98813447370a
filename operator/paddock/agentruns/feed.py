"""What the run's follower in its sandbox's sidecar pushes (``data/gate/follow.mjs``), kept for
the run's steps: the journals' bytes past the log's cursor, the completion record once every
byte before it came, the wrapper's and the gate server's liveness, and the gate's waiting
requests; and what goes back on the same stream (acks of the stored log, the gate's answers).

The frames are the sandbox's word, as an exec poll's output was: nothing in them is trusted
beyond what ``following.follow`` checks (the completion's nonce above all). A feed that cannot
say (its stream was lost, or the follower refused a journal) answers None, and the run is
polled by exec for that step, as before streams; a stale wrapper beat is checked that way too,
in the sandbox container itself, and so is a completion record without the run's nonce (the
agent may write one: the exec poll reads the record there is now).

A frame wakes the run's step only when it brings something new: journal bytes (not urgent:
the step may wait to batch them into one log write), or anything else (urgent: a gate request
waits for its answer)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from paddock.render import gate_scripts, run_scripts
from paddock.render.gate_scripts import GatePoll
from paddock.runs import journal

JOURNALS = ("stdout", "files")


@dataclass
class _State:
    base: dict[str, int]
    data: dict[str, bytearray] = field(default_factory=lambda: {j: bytearray() for j in JOURNALS})
    exit: dict[str, str] | None = None
    ends: dict[str, int] = field(default_factory=dict)
    wrapper_stale: bool = False  # (not told yet: it was launched a moment ago)
    server_stale: bool = False  # (not told yet: the prepare waited for its first beat)
    requests: dict[str, bytes] = field(default_factory=dict)
    prepared: bool = False
    missing: bool = False
    lost: str = ""  # why the feed cannot say (empty while it can)
    broken: bool = False  # a frame out of order: the feed no longer says, it is opened again


class Feed:
    """One run's stream. ``wake(urgent)`` is called (on the stream's thread) whenever a frame
    adds something, for the run's daemon to step; not while ``quiet`` (the run is polled by
    exec meanwhile, at its own pace)."""

    def __init__(self, cursor: Mapping[str, int], wake: Callable[[bool], None]) -> None:
        self._lock = threading.Lock()
        self._state = _State({j: int(cursor.get(j, 0)) for j in JOURNALS})
        self._wake = wake
        self._said = threading.Event()  # "prepared" or the end
        self.exit_code: int | None = None
        self.stderr = ""
        self.channel: _Sender | None = None
        self.quiet = False
        self._acked = (self._state.base["stdout"], self._state.base["files"])
        self.unfollowable = False  # the pod said it cannot run the follower

    # -- the stream's side ---------------------------------------------------------------------

    def line(self, raw: bytes) -> None:
        if raw in (gate_scripts.PREPARED.encode(), gate_scripts.UNFOLLOWED.encode()):
            with self._lock:
                self._state.prepared = True
                if raw == gate_scripts.UNFOLLOWED.encode():
                    self._state.lost = "the run's follower cannot run in this pod"
                    self.unfollowable = True
            self._said.set()
            return
        try:
            frame = json.loads(raw)
        except ValueError:
            return
        if not isinstance(frame, dict):
            return
        with self._lock:
            news = _apply(self._state, frame)
        if news is not None and not self.quiet:
            self._wake(news)

    def ended(self, exit_code: int | None, stderr: str) -> None:
        self.exit_code, self.stderr = exit_code, stderr
        with self._lock:
            self._state.lost = self._state.lost or (
                "the follower's stream ended" if exit_code is not None else "its stream was lost"
            )
        self._said.set()
        self._wake(True)

    # -- the run's side ------------------------------------------------------------------------

    def wait_prepared(self, timeout: float) -> bool:
        """Whether the follower's exec prepared the run (False: it ended without, or said
        nothing in ``timeout`` seconds)."""
        self._said.wait(timeout)
        with self._lock:
            return self._state.prepared

    @property
    def following(self) -> bool:
        """Whether the feed can still say what the run does."""
        with self._lock:
            return not self._state.lost and not self._state.broken

    def poll(self, cursor: Mapping[str, int]) -> run_scripts.Poll | None:
        """What an exec poll from ``cursor`` would see, from the frames; None where the feed
        cannot say (it is lost, or the wrapper's beat is stale: the sandbox itself is asked)."""
        with self._lock:
            state = self._state
            if state.lost or state.broken:
                return None
            if state.missing:
                return run_scripts.Poll(missing=True)
            if state.wrapper_stale:
                return None
            poll = run_scripts.Poll(wrapper_alive=True)
            for name in JOURNALS:
                if cursor.get(name, 0) != state.base[name]:
                    return None  # (acked past what the feed holds: cannot happen)
                held = bytes(state.data[name][: journal.POLL_BYTES])
                setattr(poll, name, held)
            whole = all(
                state.base[j] + len(state.data[j]) >= state.ends.get(j, 0) for j in JOURNALS
            )
            if state.exit is not None and whole:
                run_scripts.read_finish(poll, state.exit)
            return poll

    def gate(self, after: str) -> GatePoll | None:
        """The gate's server and the requests waiting, at most ``MAX_REQUESTS``: those after
        ``after`` first (as an exec poll brings them); None where the feed cannot say."""
        with self._lock:
            state = self._state
            if state.lost or state.broken:
                return None
            ids = sorted(state.requests)
            turn = [i for i in ids if i > after] + [i for i in ids if i <= after]
            waiting = {i: state.requests[i] for i in turn[: gate_scripts.MAX_REQUESTS]}
            return GatePoll(server_age=None if state.server_stale else 0, requests=waiting)

    def ack(self, cursor: Mapping[str, int]) -> None:
        """The log is stored up to ``cursor``: what the feed held before it goes, and the
        follower may send past it."""
        with self._lock:
            for name in JOURNALS:
                at = int(cursor.get(name, 0))
                gone = at - self._state.base[name]
                if gone > 0:
                    del self._state.data[name][:gone]
                    self._state.base[name] = at
        acked = (int(cursor.get("stdout", 0)), int(cursor.get("files", 0)))
        if self.channel is not None and acked != self._acked:
            self._acked = acked
            self.channel.send(f"ack {acked[0]} {acked[1]}\n")

    def answer(self, answers: Mapping[str, str]) -> bool:
        """Send the gate its answers; those requests no longer wait. False when the stream is
        gone (they are sent by exec)."""
        lines = "".join(
            f"answer {i} {base64.b64encode(text.encode()).decode()}\n"
            for i, text in answers.items()
            if gate_scripts.REQUEST_ID.match(i)
        )
        if self.channel is None or not self.channel.send(lines):
            return False
        with self._lock:
            for request_id in answers:
                self._state.requests.pop(request_id, None)
        return True

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


class _Sender(Protocol):
    """What a feed needs of its channel (``kube.channel.Channel``)."""

    def send(self, text: str) -> bool: ...

    def close(self) -> None: ...


def _apply(state: _State, frame: dict[str, object]) -> bool | None:
    """One frame into the state (pure but for the state): None when it brought nothing new,
    else whether the run's step is urgent (False: journal bytes only)."""
    kind = frame.get("k")
    if kind == "j":
        name, at = str(frame.get("j")), frame.get("at")
        if name not in JOURNALS or not isinstance(at, int):
            return None
        data = base64.b64decode(str(frame.get("b") or ""))
        end = state.base[name] + len(state.data[name])
        if at > end:  # bytes were skipped: this feed no longer says, it is opened again
            state.broken = True
            return True
        if at + len(data) <= end:
            return None
        state.data[name].extend(data[end - at :])
        whole = b"\n" in data or len(state.data[name]) >= journal.POLL_BYTES
        return False if whole else None  # (a part of a line waits for its end)
    if kind in ("wrapper", "server"):
        stale = frame.get("stale") is True
        before = state.wrapper_stale if kind == "wrapper" else state.server_stale
        if kind == "wrapper":
            state.wrapper_stale = stale
        else:
            state.server_stale = stale
        return True if stale != before else None
    if kind == "beat":
        return None
    if kind == "exit":
        state.exit = {k: str(frame.get(k) or "") for k in ("exit", "stderr", "changes", "diff")}
        ends = frame.get("ends")
        if isinstance(ends, dict):
            state.ends = {j: int(ends[j]) for j in JOURNALS if isinstance(ends.get(j), int)}
    elif kind == "gate":
        request_id = str(frame.get("id"))
        if gate_scripts.REQUEST_ID.match(request_id):
            state.requests[request_id] = base64.b64decode(str(frame.get("b") or ""))
    elif kind == "done":
        state.requests.pop(str(frame.get("id")), None)
    elif kind == "missing":
        state.missing = True
    elif kind == "refused":
        state.lost = f"the follower refused to read: {frame.get('why')}"
    else:
        return None
    return True
