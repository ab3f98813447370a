"""Every call a run makes into its sandbox's pod: one long-lived stream into the gate sidecar,
which prepares the run (its control files, the gate's server) and then follows it
(``feed.py``), and execs for the rest: into the sandbox container (launch the harness, signal
or kill it, the secret env it started with, and a poll of its journals where the stream cannot
say) or into the sidecar (close the gate; the gate's requests and answers where there is no
stream). What each runs is ``render/run_scripts`` and ``render/gate_scripts``; this module only
calls and reads the answer."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping

from paddock import metrics
from paddock.agentruns.asking import Answered
from paddock.agentruns.feed import Feed
from paddock.agentruns.sandbox import ReadySandbox
from paddock.harness import Invocation
from paddock.kube import exec as kube_exec
from paddock.kube.channel import open_channel
from paddock.kube.errors import KubeError
from paddock.render import gate_scripts, run_scripts
from paddock.render.gate_scripts import GatePoll
from paddock.runs import journal
from paddock.vocab.names import GATE_CONTAINER, SANDBOX_CONTAINER


def _exec(
    namespace: str, pod: str, container: str, argv: list[str], stdin: str | None = None
) -> kube_exec.ExecResult:
    metrics.pod_called("exec")
    return kube_exec.run(namespace, pod, container, argv, stdin=stdin)


def _stream(namespace: str, pod: str, argv: list[str], feed: Feed, first: str = "") -> None:
    """Open the run's stream into the sidecar for ``feed``."""
    metrics.pod_called("stream")
    feed.channel = open_channel(namespace, pod, GATE_CONTAINER, argv, feed.line, feed.ended,
                                first=first, silence=SILENCE_SECONDS)  # fmt: skip


def launch(namespace: str, pod: str, run_id: str, payload: str) -> kube_exec.ExecResult:
    """Start the run's harness (its wrapper reads the nonce, env and prompt on stdin)."""
    argv = run_scripts.launch_argv(run_id)
    return _exec(namespace, pod, SANDBOX_CONTAINER, argv, stdin=payload)


def signal(namespace: str, pod: str, run_id: str, name: str) -> None:
    """Send the run's harness's process group ``SIG<name>``."""
    _exec(namespace, pod, SANDBOX_CONTAINER, run_scripts.signal_argv(run_id, name))


def started_secret_values(namespace: str, sandbox: ReadySandbox) -> list[str] | None:
    """The values of the sandbox container's secret env as it started (one exec); None where
    it cannot be asked."""
    argv = run_scripts.started_secrets_argv()
    with contextlib.suppress(KubeError):
        done = _exec(namespace, sandbox.pod, SANDBOX_CONTAINER, argv)
        if done.exit_code == 0:
            return run_scripts.parse_started_secrets(done.stdout)
    return None


def kill(namespace: str, run_uid: str, pod: str) -> None:
    """Kill a running harness's process group (the run is being deleted)."""
    signal(namespace, pod, run_uid, "KILL")


def _unreachable(exc: KubeError) -> str:
    return (
        f"its sidecar {GATE_CONTAINER} cannot be reached ({exc.message}); a sandbox pod "
        "made by an operator older than the sidecar has none: pause and resume the Sandbox"
    )


def poll(namespace: str, pod: str, run_id: str, cursor: dict[str, int]) -> run_scripts.Poll:
    """What the run's journals hold past ``cursor``, and whether its harness is done."""
    argv = run_scripts.poll_argv(
        run_id, cursor.get("stdout", 0), cursor.get("files", 0), journal.POLL_BYTES
    )
    result = _exec(namespace, pod, SANDBOX_CONTAINER, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"poll exited {result.exit_code}: {result.stderr.strip()[-500:]}")
    return run_scripts.parse_poll(result.stdout)


def poll_gate(namespace: str, sandbox: ReadySandbox, run_id: str, after: str) -> GatePoll:
    """The gate's server's state and the requests waiting, from the sandbox's sidecar."""
    argv = gate_scripts.poll_argv(run_id, after)
    result = _exec(namespace, sandbox.pod, GATE_CONTAINER, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"gate poll exited {result.exit_code}: {result.stderr[-500:]}")
    return gate_scripts.parse_poll(result.stdout)


def close_gate(namespace: str, sandbox: ReadySandbox, run_id: str) -> None:
    """Stop the run's gate server and remove its control files (the run ended)."""
    with contextlib.suppress(KubeError):
        _exec(namespace, sandbox.pod, GATE_CONTAINER, gate_scripts.close_argv(run_id))


def send_answers(namespace: str, sandbox: ReadySandbox, run_id: str, answered: Answered) -> None:
    """Give the gate its answers, by an exec into the sandbox's sidecar."""
    payload = gate_scripts.answer_payload(answered.answers)
    result = _exec(
        namespace, sandbox.pod, GATE_CONTAINER, gate_scripts.answer_argv(run_id), stdin=payload
    )
    if result.exit_code != 0:  # the step is retried, and the requests come again
        raise RuntimeError(f"answering the gate exited {result.exit_code}: {result.stderr}")


PREPARE_SECONDS = 60.0  # the longest a prepare may take before the run's launch fails
SILENCE_SECONDS = 30.0  # a stream that says nothing this long is lost (the follower beats at 10)
REFOLLOW_SECONDS = 30.0  # after a stream could not be opened again, the run is polled this long


class Observer:
    """How the operator sees a running run: through its stream while there is one, by exec
    polls while there is not (a pod made by an older operator, a stream lost and not yet opened
    again, a stale wrapper beat the sandbox itself must confirm). A lost stream is opened again
    from the log's cursor, at most every ``REFOLLOW_SECONDS`` while that fails."""

    def __init__(self, namespace: str, run_id: str, wake: Callable[[bool], None]) -> None:
        self.namespace, self.run_id, self.wake = namespace, run_id, wake
        self.feed: Feed | None = None
        self.retry_at = 0.0
        self.gate_after = ""  # the gate's requests go on after this one (fair to each)
        self.by_exec = False  # the last poll was an exec's: the next is due soon, not woken
        self.unfollowable = False  # this pod cannot run the run's follower: polled for good
        self.shut = False  # the execution is done with: nothing is opened again

    def prepare(
        self, sandbox: ReadySandbox, invocation: Invocation, cursor: Mapping[str, int]
    ) -> str:
        """Prepare the run on the exec that then follows it; what went wrong, or ''."""
        self.close()
        files = {**invocation.files, "harness": invocation.script}
        argv = gate_scripts.prepare_argv(self.run_id, gated=invocation.gated, follow=True)
        payload = gate_scripts.prepare_payload(files, gated=invocation.gated)
        feed = Feed(cursor, self.wake)
        try:
            _stream(self.namespace, sandbox.pod, argv, feed, payload)
        except KubeError as exc:
            return _unreachable(exc)
        if feed.wait_prepared(PREPARE_SECONDS) and not self.shut:
            self.feed = feed
            return ""
        feed.close()
        return f"its sidecar could not prepare it (exit {feed.exit_code}): {feed.stderr[-500:]}"

    @property
    def streaming(self) -> bool:
        return self.feed is not None and self.feed.following

    def poll(
        self, pod: str, cursor: Mapping[str, int], genuine: Callable[[str], bool]
    ) -> run_scripts.Poll:
        """What the run's journals hold past ``cursor``, and whether its harness is done. A
        completion record the stream brings without the run's nonce (``genuine``), or not one
        at all, is read again in the sandbox: the record there now may be the wrapper's."""
        said = self._feed(pod, cursor)
        found = said.poll(cursor) if said is not None else None
        if found is not None and (found.completion is not None or found.malformed_completion):
            real = found.completion is not None and genuine(found.completion.nonce)
            found = found if real else None
        self.by_exec = found is None
        if said is not None:
            said.quiet = self.by_exec  # (polled at its own pace meanwhile)
        return found if found is not None else poll(self.namespace, pod, self.run_id, dict(cursor))

    def gate(self, sandbox: ReadySandbox) -> GatePoll:
        """The gate's server's state and the requests waiting."""
        feed = self.feed if self.streaming else None
        found = feed.gate(self.gate_after) if feed is not None else None
        if found is None:
            found = poll_gate(self.namespace, sandbox, self.run_id, self.gate_after)
        self.gate_after = gate_scripts.cursor(found)
        return found

    def answer(self, sandbox: ReadySandbox, answered: Answered) -> None:
        """Give the gate its answers: on the stream, else by exec."""
        if not answered.answers:
            return
        if not (self.streaming and self.feed is not None and self.feed.answer(answered.answers)):
            send_answers(self.namespace, sandbox, self.run_id, answered)
        metrics.policy_decided(answered.decisions, "harness")

    def stored(self, cursor: Mapping[str, int]) -> None:
        """The log is stored up to ``cursor``."""
        if self.feed is not None:
            self.feed.ack(cursor)

    def close(self, *, shut: bool = False) -> None:
        """Close the run's stream; ``shut``: for good (the execution is done with)."""
        self.shut = self.shut or shut
        if self.feed is not None:
            self.feed.close()
            self.feed = None

    def _feed(self, pod: str, cursor: Mapping[str, int]) -> Feed | None:
        """The run's stream, opened again from ``cursor`` when it was lost (and it is time)."""
        if self.streaming:
            return self.feed
        if self.feed is not None and self.feed.unfollowable:
            self.unfollowable = True
        now = time.monotonic()
        if now < self.retry_at or self.unfollowable or self.shut:
            return None
        self.close()
        self.retry_at = now + REFOLLOW_SECONDS
        feed = Feed(cursor, self.wake)
        argv = gate_scripts.follow_argv(self.run_id, cursor)
        try:
            _stream(self.namespace, pod, argv, feed)
        except KubeError:
            return None
        if self.shut:
            feed.close()
            return None
        self.feed = feed
        return feed
