"""Every call a run makes into its sandbox's pod, each an exec: into the sandbox container
(launch the harness, poll its journals, signal or kill it, the secret env it started with)
or into the gate sidecar (prepare the run's control files, poll the gate's requests, answer
them, close the gate). What each runs is ``render/run_scripts`` and ``render/gate_scripts``;
this module only calls and reads the answer."""

from __future__ import annotations

import contextlib

from paddock import metrics
from paddock.agentruns.asking import Answered
from paddock.agentruns.sandbox import ReadySandbox
from paddock.harness import Invocation
from paddock.kube import exec as kube_exec
from paddock.kube.errors import KubeError
from paddock.render import gate_scripts, run_scripts
from paddock.render.gate_scripts import GatePoll
from paddock.runs import journal
from paddock.vocab.names import GATE_CONTAINER, SANDBOX_CONTAINER


def launch(namespace: str, pod: str, run_id: str, payload: str) -> kube_exec.ExecResult:
    """Start the run's harness (its wrapper reads the nonce, env and prompt on stdin)."""
    argv = run_scripts.launch_argv(run_id)
    return kube_exec.run(namespace, pod, SANDBOX_CONTAINER, argv, stdin=payload)


def signal(namespace: str, pod: str, run_id: str, name: str) -> None:
    """Send the run's harness's process group ``SIG<name>``."""
    kube_exec.run(namespace, pod, SANDBOX_CONTAINER, run_scripts.signal_argv(run_id, name))


def started_secret_values(namespace: str, sandbox: ReadySandbox) -> list[str] | None:
    """The values of the sandbox container's secret env as it started (one exec); None where
    it cannot be asked."""
    argv = run_scripts.started_secrets_argv()
    with contextlib.suppress(KubeError):
        done = kube_exec.run(namespace, sandbox.pod, SANDBOX_CONTAINER, argv)
        if done.exit_code == 0:
            return run_scripts.parse_started_secrets(done.stdout)
    return None


def kill(namespace: str, run_uid: str, pod: str) -> None:
    """Kill a running harness's process group (the run is being deleted)."""
    signal(namespace, pod, run_uid, "KILL")


def prepare(namespace: str, sandbox: ReadySandbox, run_id: str, invocation: Invocation) -> str:
    """Write the run's control files (its harness script among them) in the sandbox's
    sidecar, and start the gate's server for a gated run; what went wrong, or ''."""
    files = {**invocation.files, "harness": invocation.script}
    argv = gate_scripts.prepare_argv(run_id, gated=invocation.gated)
    payload = gate_scripts.prepare_payload(files, gated=invocation.gated)
    try:
        result = kube_exec.run(namespace, sandbox.pod, GATE_CONTAINER, argv, stdin=payload)
    except KubeError as exc:
        return (
            f"its sidecar {GATE_CONTAINER} cannot be reached ({exc.message}); a sandbox pod "
            "made by an operator older than the sidecar has none: pause and resume the Sandbox"
        )
    if result.exit_code == 0:
        return ""
    return f"its sidecar could not prepare it (exit {result.exit_code}): {result.stderr[-500:]}"


def poll(namespace: str, pod: str, run_id: str, cursor: dict[str, int]) -> run_scripts.Poll:
    """What the run's journals hold past ``cursor``, and whether its harness is done."""
    argv = run_scripts.poll_argv(
        run_id, cursor.get("stdout", 0), cursor.get("files", 0), journal.POLL_BYTES
    )
    result = kube_exec.run(namespace, pod, SANDBOX_CONTAINER, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"poll exited {result.exit_code}: {result.stderr.strip()[-500:]}")
    return run_scripts.parse_poll(result.stdout)


def poll_gate(namespace: str, sandbox: ReadySandbox, run_id: str, after: str) -> GatePoll:
    """The gate's server's state and the requests waiting, from the sandbox's sidecar."""
    argv = gate_scripts.poll_argv(run_id, after)
    result = kube_exec.run(namespace, sandbox.pod, GATE_CONTAINER, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"gate poll exited {result.exit_code}: {result.stderr[-500:]}")
    return gate_scripts.parse_poll(result.stdout)


def close_gate(namespace: str, sandbox: ReadySandbox, run_id: str) -> None:
    """Stop the run's gate server and remove its control files (the run ended)."""
    with contextlib.suppress(KubeError):
        kube_exec.run(namespace, sandbox.pod, GATE_CONTAINER, gate_scripts.close_argv(run_id))


def send_answers(namespace: str, sandbox: ReadySandbox, run_id: str, answered: Answered) -> None:
    """Give the gate its answers, through the sandbox's sidecar."""
    if not answered.answers:
        return
    payload = gate_scripts.answer_payload(answered.answers)
    result = kube_exec.run(
        namespace, sandbox.pod, GATE_CONTAINER, gate_scripts.answer_argv(run_id), stdin=payload
    )
    if result.exit_code != 0:  # the step is retried, and the requests come again
        raise RuntimeError(f"answering the gate exited {result.exit_code}: {result.stderr}")
    metrics.policy_decided(answered.decisions, "harness")
