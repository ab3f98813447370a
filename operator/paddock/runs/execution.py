"""One run from start to end: find the sandbox, start the harness, follow its journal into the
log, and finish. Driven by a per-run daemon calling ``step`` until it returns None.

Everything a step decides from is durable: the log (events and the journal cursor, written
together), the run's status (the completion digest), and the files in the sandbox. An operator
that stops anywhere and starts again builds the same ``Execution`` and carries on.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from paddock import metrics
from paddock.api.agentrun import AgentRunSpec, Harness, Reuse, RunPhase
from paddock.api.common import parse_duration
from paddock.api.workspace import WorkspaceSpec
from paddock.conditions import set_condition
from paddock.harness import HARNESSES
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.render import run_scripts
from paddock.runs import events as ev
from paddock.runs import journal
from paddock.runs.events import Draft, RunSummary
from paddock.runs.log import ConfigMapLog
from paddock.runs.sandbox import (
    SANDBOX_CONTAINER,
    ReadySandbox,
    Unusable,
    Waiting,
    resolve,
    touch,
)
from paddock.sandboxes.reconcile import secret_refs

log = logging.getLogger("paddock.runs")

IDLE_POLL_SECONDS = 1.0
WAIT_SECONDS = 2.0
KILL_GRACE = timedelta(seconds=10)
TOUCH_EVERY = timedelta(seconds=30)
STDERR_LINES = 20

Obj = dict[str, Any]


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def digest(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


@dataclass
class Execution:
    """The operator's memory of one run between steps; rebuilt from durable state on start."""

    run: Obj
    log: ConfigMapLog
    summary: RunSummary
    cursor: dict[str, int]
    secrets: list[str] = field(default_factory=list)
    sandbox: ReadySandbox | None = None
    signalled: dict[str, datetime] = field(default_factory=dict)
    touched: datetime | None = None
    wrapper_gone_polls: int = 0
    notices: list[tuple[str, str, str]] = field(default_factory=list)

    @classmethod
    def load(cls, run: Obj) -> Execution:
        """From the log and the run as stored (the status this execution then keeps itself)."""
        meta = run["metadata"]
        run = kube.get("AgentRun", meta["namespace"], meta["name"]) or run
        run_log = ConfigMapLog(run)
        events, cursor = run_log.load()
        summary = RunSummary()
        summary.add_all(events)
        return cls(run=run, log=run_log, summary=summary, cursor=cursor)

    # -- what the run is -------------------------------------------------------------------

    @property
    def meta(self) -> Obj:
        return self.run["metadata"]  # type: ignore[no-any-return]

    @property
    def namespace(self) -> str:
        return str(self.meta["namespace"])

    @property
    def run_id(self) -> str:
        return str(self.meta["uid"])

    @property
    def status(self) -> Obj:
        return self.run.get("status") or {}

    def spec(self) -> AgentRunSpec:
        return AgentRunSpec.model_validate(self.run["spec"])

    # -- one step ------------------------------------------------------------------------------

    def step(self, run: Obj, now: datetime | None = None) -> float | None:
        """Advance the run; the seconds until the next step, or None when it has ended.
        ``run`` brings the latest spec and metadata; the status is the one this execution
        wrote last, which a watch may not have delivered yet."""
        self.run = {**run, "status": self.run.get("status") or {}}
        now = now or datetime.now(UTC)
        spec = self.spec()
        if self.summary.terminal is not None:
            self._finish_status(spec)
            return None
        abort = self._abort_reason(spec, now)
        started = ev.RUN_STARTED in self.summary.types_seen
        if abort is not None and not started:
            self._end(spec, [], abort, exit_code=None, message=self._abort_message(abort, spec))
            return None
        if not started:
            return self._start(spec, now)
        return self._follow(spec, now, abort)

    def _abort_reason(self, spec: AgentRunSpec, now: datetime) -> RunPhase | None:
        if spec.cancel:
            return RunPhase.CANCELLED
        created = _parse_time(self.meta.get("creationTimestamp"))
        deadline = created + parse_duration(spec.timeout) if created else None
        if deadline is not None and now >= deadline:
            return RunPhase.TIMED_OUT
        return None

    @staticmethod
    def _abort_message(abort: RunPhase, spec: AgentRunSpec) -> str:
        if abort == RunPhase.CANCELLED:
            return "cancelled: spec.cancel is true"
        return f"timed out: the run took longer than its timeout of {spec.timeout}"

    # -- before the harness starts ------------------------------------------------------------

    def _start(self, spec: AgentRunSpec, now: datetime) -> float | None:
        refs = [(s.secret_key_ref.name, s.secret_key_ref.key) for s in spec.secrets]
        if spec.prompt_from is not None and spec.prompt_from.secret_key_ref is not None:
            refs.append((spec.prompt_from.secret_key_ref.name, spec.prompt_from.secret_key_ref.key))
        missing = kube.missing_secret_keys(self.namespace, refs)
        if missing:
            message = (
                f"Secret keys not found in namespace {self.namespace}: {', '.join(missing)}; "
                "the run starts when they exist"
            )
            self._patch(
                RunPhase.PENDING,
                message,
                condition=("SecretsFound", False, "SecretNotFound", message),
            )
            return WAIT_SECONDS
        resolved = resolve(self.run, spec)
        if isinstance(resolved, Waiting):
            self._patch(
                RunPhase.WAITING_FOR_SANDBOX,
                resolved.message,
                sandbox=resolved.name,
                condition=("SandboxReady", False, resolved.reason, resolved.message),
            )
            return WAIT_SECONDS
        if isinstance(resolved, Unusable):
            self._end(spec, [], RunPhase.FAILED, None, resolved.message, reason=resolved.reason)
            return None
        self.sandbox = resolved
        run_secrets = self._load_secrets(spec, resolved)
        if ev.SANDBOX_READY not in self.summary.types_seen:
            self._append(
                [
                    Draft(
                        ev.SANDBOX_READY,
                        f"sandbox {resolved.name} is ready",
                        {"sandbox": resolved.name, "pod": resolved.pod},
                    )
                ]
            )
        if self._poll().missing:
            # Not launched yet. (A launch an operator stop interrupted left the run directory:
            # that harness runs on, with the nonce whose digest is already in the status.)
            nonce = secrets.token_hex(32)
            self._patch(
                RunPhase(self.status.get("phase") or RunPhase.PENDING),
                "starting the harness",
                sandbox=resolved.name,
                extra={"completionDigest": digest(nonce)},
            )
            failure = self._launch(spec, resolved, nonce, run_secrets)
            if failure is not None:
                self._end(spec, [], RunPhase.FAILED, None, failure, reason="LaunchFailed")
                return None
        self._append(
            [
                Draft(
                    ev.RUN_STARTED,
                    f"{spec.harness} started in sandbox {resolved.name}",
                    {"harness": str(spec.harness), "sandbox": resolved.name, "pod": resolved.pod},
                )
            ]
        )
        self._patch(
            RunPhase.RUNNING,
            f"{spec.harness} is running in sandbox {resolved.name}",
            sandbox=resolved.name,
            condition=("SandboxReady", True, "Ready", f"Sandbox {resolved.name} is Ready"),
            extra={"startedAt": _iso(now)},
        )
        return 0

    def _load_secrets(self, spec: AgentRunSpec, sandbox: ReadySandbox) -> dict[str, str]:
        """The run's secret env (for the harness), and every secret value the run could see
        remembered for scrubbing."""
        refs = [(s.secret_key_ref.name, s.secret_key_ref.key) for s in spec.secrets]
        if spec.prompt_from is not None and spec.prompt_from.secret_key_ref is not None:
            refs.append((spec.prompt_from.secret_key_ref.name, spec.prompt_from.secret_key_ref.key))
        workspace = kube.get("Workspace", self.namespace, sandbox.workspace)
        workspace_refs: list[tuple[str, str]] = []
        if workspace is not None:
            try:
                workspace_refs = secret_refs(WorkspaceSpec.model_validate(workspace["spec"]))
            except ValueError:
                workspace_refs = []
        values = kube.secret_values(self.namespace, refs + workspace_refs)
        self.secrets = list(values.values())
        return {
            s.name: values[(s.secret_key_ref.name, s.secret_key_ref.key)]
            for s in spec.secrets
            if (s.secret_key_ref.name, s.secret_key_ref.key) in values
        }

    def _prompt(self, spec: AgentRunSpec) -> str | None:
        if spec.prompt_from is None:
            return spec.prompt
        ref = spec.prompt_from.config_map_key_ref or spec.prompt_from.secret_key_ref
        assert ref is not None
        if spec.prompt_from.config_map_key_ref is not None:
            configmap = kube.get("ConfigMap", self.namespace, ref.name) or {}
            return str((configmap.get("data") or {}).get(ref.key, ""))
        values = kube.secret_values(self.namespace, [(ref.name, ref.key)])
        return values.get((ref.name, ref.key), "")

    def _launch(
        self, spec: AgentRunSpec, sandbox: ReadySandbox, nonce: str, secret_env: dict[str, str]
    ) -> str | None:
        """Start the harness; None, or why it could not be started."""
        harness = HARNESSES[spec.harness]
        invocation = harness.invocation(spec)
        env = {e.name: e.value or "" for e in spec.env} | invocation.env
        env |= secret_env
        payload = run_scripts.launch_payload(nonce, env, invocation.script, self._prompt(spec))
        result = kube_exec.run(
            self.namespace,
            sandbox.pod,
            SANDBOX_CONTAINER,
            run_scripts.launch_argv(self.run_id),
            stdin=payload,
        )
        if result.exit_code == 0:
            return None
        said = ev.scrub(result.stderr.strip()[-500:], self.secrets)
        return (
            f"starting {spec.harness} in pod {sandbox.pod} failed (exit {result.exit_code}): {said}"
        )

    # -- while it runs -------------------------------------------------------------------------

    def _poll(self) -> run_scripts.Poll:
        assert self.sandbox is not None
        result = kube_exec.run(
            self.namespace,
            self.sandbox.pod,
            SANDBOX_CONTAINER,
            run_scripts.poll_argv(
                self.run_id,
                self.cursor.get("stdout", 0),
                self.cursor.get("files", 0),
                journal.POLL_BYTES,
            ),
        )
        if result.exit_code != 0:
            raise RuntimeError(f"poll exited {result.exit_code}: {result.stderr.strip()[-500:]}")
        return run_scripts.parse_poll(result.stdout)

    def _follow(self, spec: AgentRunSpec, now: datetime, abort: RunPhase | None) -> float | None:
        if self.sandbox is None:
            resolved = resolve(self.run, spec)
            if not isinstance(resolved, ReadySandbox):
                message = f"the sandbox went away while the run was running: {resolved.message}"
                self._end(spec, [], RunPhase.FAILED, None, message, reason="SandboxLost")
                return None
            self.sandbox = resolved
            self._load_secrets(spec, resolved)
        if abort is not None:
            self._signal(abort, now)
        if self.touched is None or now - self.touched >= TOUCH_EVERY:
            touch(self.namespace, self.sandbox.name, now)
            self.touched = now
        try:
            poll = self._poll()
        except ApiException as exc:
            if exc.status == 404:
                message = f"the sandbox pod {self.sandbox.pod} is gone; the run's process with it"
                self._end(spec, [], RunPhase.FAILED, None, message, reason="SandboxLost")
                return None
            raise
        if poll.missing:
            message = (
                f"the run's directory is gone from pod {self.sandbox.pod}: the pod was "
                "replaced while the run was running"
            )
            self._end(spec, [], RunPhase.FAILED, None, message, reason="SandboxLost")
            return None
        final = poll.completion is not None and self._genuine(poll.completion)
        consumed = journal.consume(
            HARNESSES[spec.harness].parse_line,
            {"stdout": poll.stdout, "files": poll.files},
            self.cursor,
            self.summary.session_id,
            final=final,
        )
        drafts, cursor, more = consumed.drafts, consumed.cursor, consumed.more
        if drafts or cursor != self.cursor:
            self._append(drafts, cursor)
            self._patch(RunPhase.RUNNING, self.status.get("message"), sandbox=self.sandbox.name)
        if more:
            return 0
        if poll.completion is not None and not final:
            self._forged(poll)
        if final and poll.completion is not None:
            self._complete(spec, poll, poll.completion.exit_code, abort)
            return None
        if not poll.wrapper_alive and poll.completion is None:
            # The record is written before the wrapper exits: one more poll rules out a race.
            self.wrapper_gone_polls += 1
            if self.wrapper_gone_polls >= 2:
                message = (
                    "the harness's wrapper ended without a completion record (killed, or the "
                    "sandbox container restarted)"
                )
                self._end(spec, [], RunPhase.FAILED, None, message, reason="WrapperLost")
                return None
        return IDLE_POLL_SECONDS

    def _genuine(self, completion: run_scripts.Completion) -> bool:
        expected = str(self.status.get("completionDigest") or "")
        return bool(expected) and secrets.compare_digest(digest(completion.nonce), expected)

    def _forged(self, poll: run_scripts.Poll) -> None:
        if any(
            e["type"] == ev.ERROR and e["data"].get("reason") == "ForgedCompletion"
            for e in self.summary.last
        ):
            return
        self._append(
            [
                Draft(
                    ev.ERROR,
                    "a completion record without the run's nonce was ignored",
                    {"reason": "ForgedCompletion"},
                )
            ]
        )

    def _signal(self, abort: RunPhase, now: datetime) -> None:
        assert self.sandbox is not None
        first = self.signalled.get("TERM")
        if first is None:
            signal = "TERM"
        elif now - first >= KILL_GRACE and "KILL" not in self.signalled:
            signal = "KILL"
        else:
            return
        kube_exec.run(
            self.namespace,
            self.sandbox.pod,
            SANDBOX_CONTAINER,
            run_scripts.signal_argv(self.run_id, signal),
        )
        self.signalled[signal] = now
        log.info("run %s/%s: sent SIG%s (%s)", self.namespace, self.meta["name"], signal, abort)

    # -- the end -----------------------------------------------------------------------------

    def _complete(
        self, spec: AgentRunSpec, poll: run_scripts.Poll, code: int, abort: RunPhase | None
    ) -> None:
        changes = run_scripts.parse_changes(poll.changes)
        drafts = []
        if changes or poll.diff:
            drafts.append(
                Draft(
                    ev.FILE_CHANGED,
                    f"{len(changes)} file(s) changed",
                    {
                        "files": [{"path": p, "status": s} for s, p in changes],
                        "diff": poll.diff,
                    },
                )
            )
        stderr = "\n".join(poll.stderr_tail.splitlines()[-STDERR_LINES:])
        result = self.summary.result or {}
        if abort is not None:
            phase, message = abort, self._abort_message(abort, spec)
        elif code == 0 and not result.get("isError"):
            phase, message = RunPhase.SUCCEEDED, f"{spec.harness} finished"
        else:
            phase = RunPhase.FAILED
            why = self._why(spec, stderr, result)
            message = f"{spec.harness} exited with code {code}" + (f": {why}" if why else "")
        self._end(spec, drafts, phase, code, message, stderr=stderr)

    def _why(self, spec: AgentRunSpec, stderr: str, result: Obj) -> str:
        """The likeliest reason a harness failed: an agent's own error event or error result
        before its stderr (where CLIs also print warnings); a command's stderr."""
        last_stderr = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        if spec.harness == Harness.COMMAND:
            return last_stderr
        if self.summary.last_error:
            return self.summary.last_error
        if result.get("isError") and result.get("text"):
            return str(result["text"])
        return last_stderr

    def _end(
        self,
        spec: AgentRunSpec,
        drafts: list[Draft],
        phase: RunPhase,
        exit_code: int | None,
        message: str,
        *,
        reason: str | None = None,
        stderr: str = "",
    ) -> None:
        kind = {
            RunPhase.SUCCEEDED: ev.RUN_COMPLETED,
            RunPhase.FAILED: ev.RUN_FAILED,
        }.get(phase, ev.RUN_ABORTED)
        data: Obj = {"phase": str(phase), "exitCode": exit_code, "message": message}
        if reason:
            data["reason"] = reason
        if stderr:
            data["stderrTail"] = stderr
        self._append([*drafts, Draft(kind, message, data)])
        self._finish_status(spec)

    def _finish_status(self, spec: AgentRunSpec) -> None:
        """Remove the run's own sandbox, then write the final status: the last act, since a
        terminal phase is what ends the daemon."""
        terminal = self.summary.terminal
        assert terminal is not None
        data = terminal["data"]
        if spec.sandbox_template is not None and spec.effective_reuse == Reuse.NONE:
            name = self.status.get("sandboxName")
            if name:
                kube.delete("Sandbox", self.namespace, name)
        self._patch(
            RunPhase(data["phase"]),
            data["message"],
            condition=("Complete", True, data["phase"], data["message"]),
            extra={
                "completedAt": terminal["time"],
                "result": {
                    "exitCode": data.get("exitCode"),
                    "isError": data["phase"] != RunPhase.SUCCEEDED,
                    "summary": ev.one_line(
                        str((self.summary.result or {}).get("text") or data["message"]), 1000
                    ),
                },
            },
        )

    # -- writing -------------------------------------------------------------------------------

    def _append(self, drafts: list[Draft], cursor: dict[str, int] | None = None) -> None:
        if not drafts and cursor is None:
            return
        when = ev.now()
        events = [
            ev.stamp(draft, self.summary.next_seq + i, when, self.secrets)
            for i, draft in enumerate(drafts)
        ]
        cursor = self.cursor if cursor is None else cursor
        self.log.append(events, cursor)
        metrics.RUN_EVENTS.labels(str(self.run["spec"]["harness"])).inc(len(events))
        self.cursor = cursor
        self.summary.add_all(events)

    def _patch(
        self,
        phase: RunPhase,
        message: str | None,
        *,
        sandbox: str | None = None,
        condition: tuple[str, bool, str, str] | None = None,
        extra: Obj | None = None,
    ) -> None:
        status = self.status
        conditions = list(status.get("conditions") or [])
        if condition is not None:
            conditions = set_condition(conditions, *condition)
        summary = self.summary
        patch: Obj = {
            "phase": str(phase),
            "message": message,
            "observedGeneration": self.meta.get("generation"),
            "conditions": conditions,
            "eventCount": summary.next_seq,
            "lastEvents": [
                {"seq": e["seq"], "type": e["type"], "time": e["time"], "summary": e["summary"]}
                for e in summary.last
            ],
            "log": {"backend": "configmap", "location": self.log.location},
        }
        if sandbox is not None:
            patch["sandboxName"] = sandbox
        if summary.session_id:
            patch["sessionId"] = summary.session_id
        if summary.usage:
            patch["usage"] = summary.usage
        if summary.changed_files:
            patch["changedFiles"] = summary.changed_files
        patch |= extra or {}
        if status.get("phase") != patch["phase"]:
            failed = phase in (RunPhase.FAILED, RunPhase.TIMED_OUT)
            self.notices.append(("Warning" if failed else "Normal", str(phase), message or ""))
        kube.patch_status("AgentRun", self.namespace, self.meta["name"], patch)
        self.run["status"] = {**status, **patch}
