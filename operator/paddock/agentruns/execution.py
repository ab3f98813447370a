"""One run from start to end: find the sandbox, start the harness, follow its journal into the
log, and finish. Driven by a per-run daemon calling ``step`` until it returns None. The
decisions are ``decide.py``'s and ``sandbox.py``'s; this module reads and writes.

Everything a step decides from is durable: the log (events and the journal cursor, written
together), the run's status (the completion digest), and the files in the sandbox. An operator
that stops anywhere and starts again builds the same ``Execution`` and carries on.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from paddock.agentruns import decide, gating, host_asks, inputs, logstore, model_access, spending
from paddock.agentruns.activity import keep_active
from paddock.agentruns.decide import Ending, Progress, Wait
from paddock.agentruns.delivering import deliver, undeliverable
from paddock.agentruns.holds import hold, let_go
from paddock.agentruns.record import DeliveryPendingError, LogNameTakenError, RunRecord
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, AgentRunStatus, RunPhase, RunResult
from paddock.api.budget import Budget
from paddock.api.common import stored_status
from paddock.api.fields import parse_duration
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.harness import HARNESSES
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.kube.errors import KubeError, NotFoundError
from paddock.objectstore import errors as store
from paddock.render import gate_scripts, run_scripts
from paddock.render.names import SANDBOX_CONTAINER
from paddock.runs import events as ev
from paddock.runs.events import Draft
from paddock.settings import OperatorSettings
from paddock.times import parse_time, utcnow

log = logging.getLogger("paddock.runs")


IDLE_POLL_SECONDS = 1.0
WAIT_SECONDS = 2.0

Obj = dict[str, Any]


@dataclass
class Execution(RunRecord):
    """The operator's memory of one run between steps; rebuilt from durable state on start."""

    sandbox: ReadySandbox | None = None
    signalled: dict[str, datetime] = field(default_factory=dict)
    touched: datetime | None = None
    wrapper_gone_polls: int = 0
    gated: bool | None = None  # its harness goes through the gate (known once it is found)
    gate_after: str = ""  # the gate request the last poll ended at; the next goes on after it
    gateway: model_access.ModelGateway | None = None
    refuse_keys: bool = False  # the operator refuses model keys in sandboxes

    @classmethod
    def load(cls, run: Obj, settings: OperatorSettings) -> Execution:
        """From the log and the run as stored (the status this execution then keeps itself);
        the log is in the backend the run's status names, else the settings'."""
        meta = run["metadata"]
        run = kube.get("AgentRun", meta["namespace"], meta["name"]) or run
        run_log, summary, cursor = logstore.load_log(run, settings)
        status, written = stored_status(AgentRunStatus, run), dict(run.get("status") or {})
        gateway = model_access.model_gateway(settings)  # where a run's model key is held
        refuse = settings.model_key_in_sandbox == "refuse"  # by the operator, in every sandbox
        stall = timedelta(seconds=settings.run_start_grace_seconds)
        return cls(run, run_log, summary, cursor, status, written=written, gateway=gateway,
                   refuse_keys=refuse, stall_after=stall)  # fmt: skip

    # -- one step ------------------------------------------------------------------------------

    def step(self, run: Obj, now: datetime | None = None) -> float | None:
        """Advance the run; the seconds until the next step, or None when it has ended.
        ``run`` brings the latest spec and metadata; the status is the one this execution
        keeps, which a watch may not have delivered yet.

        A refusal by the API server is reported (condition ``Progressing``, a Warning Event)
        and raised for the daemon to retry; a run past its deadline or cancelled ends even
        then, with the status alone saying so when its log cannot be written."""
        self.run = run
        now = now or utcnow()
        spec = AgentRunSpec.model_validate(run["spec"])
        created = parse_time(run["metadata"].get("creationTimestamp"))
        try:
            delay = self._step(spec, now)
        except LogNameTakenError as taken:
            abort = decide.abort(spec, created, now)  # cancelled or timed out: that it ends
            ending = abort or Ending(RunPhase.FAILED, R.LOG_NAME_CONFLICT, str(taken))
            self._end_without_log(spec, ending, str(taken) if abort else "")
            return None
        except (KubeError, store.ObjectStoreError) as exc:
            abort = decide.abort(spec, created, now)
            if abort is not None:
                self._end_without_log(spec, abort, exc.message)
                return None
            self._failed(*logstore.refusal(exc))
            raise
        except DeliveryPendingError:  # its condition says so: tried again
            raise
        except Exception as exc:  # a bug: said where a person looks, then retried
            self._failed(R.STEP_FAILED, f"The step failed ({type(exc).__name__}: {exc})")
            raise
        self._progressing()
        return delay

    def _step(self, spec: AgentRunSpec, now: datetime) -> float | None:
        if self.summary.terminal is not None:
            self._finish(spec)
            return None
        created = parse_time(self.run["metadata"].get("creationTimestamp"))
        abort = decide.abort(spec, created, now)
        started = ev.RUN_STARTED in self.summary.types_seen
        if abort is not None and not started:
            self._end(spec, abort)
            return None
        if not started:
            return self._start(spec, now)
        return self._follow(spec, now, abort)

    # -- before the harness starts ------------------------------------------------------------

    def _start(self, spec: AgentRunSpec, now: datetime) -> float | None:
        missing = kube.missing_secret_keys(self.namespace, spec.secret_refs())
        no_prompt = None if missing else inputs.missing_prompt(self.namespace, spec)
        verdict = None if missing or no_prompt else inputs.find_sandbox(self.run, spec)
        ready = decide.before_launch(self.namespace, missing, no_prompt, verdict)
        budget, held = None, None
        if isinstance(ready, ReadySandbox):
            routed = spec.model_key is not None and self.gateway is not None
            refuse = self.refuse_keys
            budget, held = spending.may_start(self.namespace, spec, ready, routed, now, refuse)
        if isinstance(ready, ReadySandbox) and self.status.completion_digest is None:
            ready = held or inputs.queued(self.run, spec, ready) or ready
        if isinstance(ready, Wait):
            return self._wait(ready)
        if isinstance(ready, Ending):
            self._end(spec, ready)
            return None
        self.sandbox = ready
        if (why := undeliverable(self.run, spec, ready)) is not None:
            self._end(spec, Ending(RunPhase.FAILED, R.DELIVERY_UNDELIVERABLE, why))
            return None
        secret_env, self.scrubber = inputs.secrets_for(self.namespace, spec, ready)
        if ev.SANDBOX_READY not in self.summary.types_seen:
            self._append([decide.sandbox_ready(ready)], later=True)  # with run.started
        if self.status.completion_digest is None or self._poll().missing:
            # Not launched yet. (A launch an operator stop interrupted left the run directory:
            # that harness runs on, with the nonce whose digest is already in the status, which
            # is written before each launch.)
            gate = inputs.check_command(self.namespace, spec, ready, self._asking(spec, now))
            if isinstance(gate, decide.Asked):
                self._approvals(spec, gate.answered)
                if gate.answered.drafts:
                    self._append(gate.answered.drafts)
                if gate.pending:
                    self._flush()
                    return WAIT_SECONDS
                gate = gate.ending
            failure = gate or self._launch(spec, ready, secret_env, budget, now)
            if isinstance(failure, Wait):
                return self._wait(failure)
            if failure is not None:
                self._end(spec, failure)
                return None
        data = {"harness": str(spec.harness), "sandbox": ready.name, "pod": ready.pod,
                "policy": ready.policy.label, "budget": budget and budget.to_api()}  # fmt: skip
        said = f"{spec.harness} started in sandbox {ready.name}"
        self._append([Draft(ev.RUN_STARTED, said, data)])
        self._running(spec, ready, now)
        self._flush(events=False)  # (the event count and last events: with the next change)
        return 0

    def _running(self, spec: AgentRunSpec, ready: ReadySandbox, now: datetime) -> None:
        """The status of a run whose harness starts: written once, with the digest of its
        nonce, before the harness is launched (then it only changes if the launch fails)."""
        running = f"{spec.harness} is running in sandbox {ready.name}"
        self._write_status(RunPhase.RUNNING, running, ready.name)
        self._condition(C.SANDBOX_READY, True, R.SANDBOX_READY, f"Sandbox {ready.name} is Ready")
        self._resolved(C.SECRETS_FOUND, R.SECRETS_FOUND, "Every Secret key the run names exists.")
        self._resolved(C.PROMPT_FOUND, R.PROMPT_FOUND, "The prompt's ConfigMap key exists.")
        self._resolved(C.WITHIN_BUDGET, R.WITHIN_BUDGET, "The namespace's day is not spent.")
        self.status.started_at = self.status.started_at or now

    def _wait(self, wait: Wait) -> float:
        self._write_status(wait.phase, wait.message, wait.sandbox, wait.reason)
        self._condition(wait.condition, False, wait.reason, wait.message)
        self._flush()
        return WAIT_SECONDS

    def _launch(
        self,
        spec: AgentRunSpec,
        sandbox: ReadySandbox,
        env: dict[str, str],
        budget: Budget | None,
        now: datetime,
    ) -> Ending | Wait | None:
        """Hold the sandbox, prepare the run in it, then start the harness with a fresh nonce
        (its digest stored first, in the status that says the run is running); None, or why
        the run waits, or its end."""
        held = hold(self.run, sandbox)
        if held is not None:
            return held
        daily = spending.day_ceilings(self.namespace, sandbox)
        access = model_access.grant(self.run, spec, sandbox, self.gateway, utcnow(), budget, daily)
        if isinstance(access, Ending):
            return access
        if access.condition is not None:
            self._condition(C.MODEL_ROUTE, *access.condition)
        invocation = inputs.invocation(self.namespace, spec, sandbox, access.model_url)
        unprepared = inputs.prepare(self.namespace, sandbox, self.run_id, invocation)
        if unprepared:
            return decide.launch_failure(spec, sandbox.pod, 2, unprepared)
        nonce = secrets.token_hex(32)
        self.status.completion_digest = decide.digest(nonce)
        self._running(spec, sandbox, now)
        self._flush(events=False)  # the digest is stored before a harness can end
        env = {e.name: e.value or "" for e in spec.env} | invocation.env | env | access.env
        prompt = inputs.prompt(self.namespace, spec)
        payload = run_scripts.launch_payload(nonce, env, prompt)
        argv = run_scripts.launch_argv(self.run_id)
        result = kube_exec.run(self.namespace, sandbox.pod, SANDBOX_CONTAINER, argv, stdin=payload)
        if result.exit_code == 0:
            return None
        said = self.scrubber.text(result.stderr.strip()[-500:])
        return decide.launch_failure(spec, sandbox.pod, result.exit_code, said)

    # -- while it runs -------------------------------------------------------------------------

    def _poll(self) -> run_scripts.Poll:
        assert self.sandbox is not None
        return inputs.poll(self.namespace, self.sandbox.pod, self.run_id, self.cursor)

    def _gate(self, spec: AgentRunSpec) -> tuple[dict[str, bytes], Ending | None]:
        """The requests the gate waits on, from the sandbox's sidecar, and the run's end when
        the gate's server stopped (its commands are refused: the harness is killed)."""
        assert self.sandbox is not None
        if self.gated is None:
            self.gated = inputs.is_gated(spec, self.sandbox)
        if not self.gated:
            return {}, None
        gate = inputs.poll_gate(self.namespace, self.sandbox, self.run_id, self.gate_after)
        self.gate_after = gate_scripts.cursor(gate)
        if not gate.server_stopped:
            return gate.requests, None
        inputs.kill(self.namespace, self.run_id, self.sandbox.pod)
        return gate.requests, decide.gate_lost(self.sandbox.pod, gate.server_age)

    def _follow(self, spec: AgentRunSpec, now: datetime, abort: Ending | None) -> float | None:
        if self.sandbox is None:  # an operator restart: find the sandbox again
            state = inputs.find_sandbox(self.run, spec).state
            if not isinstance(state, ReadySandbox):
                message = f"the sandbox went away while the run was running: {state.message}"
                self._end(spec, decide.sandbox_lost(message))
                return None
            self.sandbox = state
            _, self.scrubber = inputs.secrets_for(self.namespace, spec, state)
        used, over = spending.follow(self.run_id, self.namespace, self.sandbox, self.summary, now)
        abort = abort or over
        if abort is not None:
            self._signal(abort, now)
        self.touched = keep_active(self.namespace, self.sandbox.name, now, self.touched)
        try:
            poll = self._poll()
        except NotFoundError:
            message = f"the sandbox pod {self.sandbox.pod} is gone; the run's process with it"
            self._end(spec, decide.sandbox_lost(message))
            return None
        progress = Progress(self.sandbox.pod, self.cursor, self.summary,
                            self.status.completion_digest, self.wrapper_gone_polls,
                            max(self.scrubber.longest - 1, 0))  # fmt: skip
        followed = decide.follow(spec, poll, HARNESSES[spec.harness].parse_line, progress, abort)
        self.wrapper_gone_polls = followed.wrapper_gone_polls
        requests, lost = self._gate(spec)
        ending = lost or followed.ending  # a gate lost ends the run so, whatever else
        asking, hosts = self._asking(spec, now), host_asks.ASKS.of_run(self.run_id)
        answered = inputs.judge_gate(self.namespace, spec, self.sandbox, requests, asking, hosts)
        drafts = used + followed.drafts
        if answered is not None:  # the commands the harness waits to run, logged first
            drafts = answered.drafts + drafts
            self._approvals(spec, answered)
        if drafts or followed.cursor != self.cursor:
            self._append(drafts, followed.cursor)
        self._flush()
        if answered is not None:
            inputs.send_answers(self.namespace, self.sandbox, self.run_id, answered)
        if ending is not None:
            self._end(spec, ending)
            return None
        return 0 if followed.poll_again_now else IDLE_POLL_SECONDS

    def _asking(self, spec: AgentRunSpec, now: datetime) -> gating.Asking:
        return gating.Asking(
            self.status.approvals,
            gating.choices(self.run["metadata"].get("annotations") or {}),
            now,
            parse_duration(spec.approval_timeout),
            spec.approval_timeout,
        )

    def _approvals(self, spec: AgentRunSpec, answered: gating.Answered) -> None:
        """The approvals into the status: AwaitingApproval while any is pending."""
        self.status.approvals = answered.approvals
        self.status.pending_approvals = len(answered.pending) if answered.approvals else None
        self.notices.extend(answered.notices)
        waiting = decide.awaiting(answered.pending, self.run["metadata"]["name"])
        if waiting is not None:  # (its Event is the request's own: no phase Event)
            self.status.phase, self.status.message = RunPhase.AWAITING_APPROVAL, waiting
            self._condition(C.AWAITING_APPROVAL, True, R.AWAITING_APPROVAL, waiting)
        elif self.status.phase == RunPhase.AWAITING_APPROVAL:
            assert self.sandbox is not None
            message = f"{spec.harness} is running in sandbox {self.sandbox.name}"
            self.status.phase, self.status.message = RunPhase.RUNNING, message
            said = "No approval is pending."
            self._condition(C.AWAITING_APPROVAL, False, R.NO_APPROVAL_PENDING, said)

    def _signal(self, abort: Ending, now: datetime) -> None:
        assert self.sandbox is not None
        signal = decide.signal_to_send(self.signalled, now)
        if signal is None:
            return
        argv = run_scripts.signal_argv(self.run_id, signal)
        kube_exec.run(self.namespace, self.sandbox.pod, SANDBOX_CONTAINER, argv)
        self.signalled[signal] = now
        name = self.run["metadata"]["name"]
        log.info("run %s/%s: sent SIG%s (%s)", self.namespace, name, signal, abort.phase)

    # -- the end -----------------------------------------------------------------------------

    def _end(self, spec: AgentRunSpec, ending: Ending) -> None:
        approvals, ended = gating.end_all(self.status.approvals, utcnow())
        delivered = self._deliver(spec, ending)
        self._append([*ending.drafts, *ended, *delivered, decide.terminal_event(ending)])
        # Only once the end is durable: a run whose gate is gone would otherwise be GateLost.
        if self.sandbox is not None and self.status.completion_digest is not None:
            inputs.close_gate(self.namespace, self.sandbox, self.run_id)
        if ended:
            self.status.approvals, self.status.pending_approvals = approvals, 0
            self._condition(C.AWAITING_APPROVAL, False, R.NO_APPROVAL_PENDING, "The run ended.")
        self._finish(spec)

    def _deliver(self, spec: AgentRunSpec, ending: Ending) -> list[Draft]:
        """Deliver the work of a run whose harness ran (spec.deliver), before its last event:
        the Delivered condition says how it went, and an event of the log."""
        if spec.deliver is None or self.sandbox is None or self.status.completion_digest is None:
            return []
        return self._delivered(deliver(self.run, spec, self.sandbox, ending.phase))

    def _end_without_log(self, spec: AgentRunSpec, ending: Ending, why: str) -> None:
        """End the run where its log cannot take the last event: the status alone says how
        (a harness launched before is killed)."""
        message = ending.message + (f" (the event log could not be written: {why})" if why else "")
        with contextlib.suppress(KubeError):
            if self.sandbox is not None and self.status.completion_digest is not None:
                inputs.kill(self.namespace, self.run_id, self.sandbox.pod)
            model_access.revoke(self.run_id, self.gateway, spec.model_key is not None)
            let_go(self.run, self.status.sandbox_name)
            inputs.remove_own_sandbox(self.run, spec, self.status.sandbox_name)
        self._write_status(ending.phase, message, reason=ending.reason)
        self._condition(C.COMPLETE, True, ending.reason, message)
        self.status.completed_at = utcnow()
        self.status.result = RunResult(
            exit_code=ending.exit_code,
            is_error=ending.phase != RunPhase.SUCCEEDED,
            summary=ev.one_line(message, 1000),
        )
        self._flush(events=False)

    def _finish(self, spec: AgentRunSpec) -> None:
        """Remove the run's own sandbox, then write the final status: the last act, since a
        terminal phase is what ends the daemon."""
        terminal = self.summary.terminal
        assert terminal is not None
        data = terminal["data"]
        model_access.revoke(self.run_id, self.gateway, spec.model_key is not None)
        host_asks.ASKS.forget(self.run_id)
        spending.METERED.forget(self.run_id)
        let_go(self.run, self.status.sandbox_name)
        inputs.remove_own_sandbox(self.run, spec, self.status.sandbox_name)
        inputs.ended_in(self.run, self.status.sandbox_name)
        phase, reason = RunPhase(data["phase"]), R(data.get("reason") or data["phase"])
        self._write_status(phase, data["message"], reason=reason)
        self._condition(C.COMPLETE, True, reason, data["message"])
        self.status.completed_at = parse_time(terminal["time"])
        self.status.result = decide.final_result(self.summary)
        self._flush()
