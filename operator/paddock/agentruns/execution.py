"""One run from start to end, driven by a per-run daemon calling ``step`` until it returns
None. Its start is a reconcile: ``observe.gather`` reads the run's world once per step,
``start.decide_start`` decides what to do (pure), and this module applies that in order,
interleaving only where the order is itself a safety property (the digest stored before the
harness is launched). Then it follows the harness's journal into the log (``following.follow``
decides), and ``ending.py`` ends it. Every call into the pod is ``in_pod.py``'s.

Everything a step decides from is durable: the log (events and the journal cursor, written
together), the run's status (the completion digest), and the files in the sandbox. An operator
that stops anywhere and starts again builds the same ``Execution`` and carries on.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from paddock import metrics
from paddock.agentruns import (
    credential_access,
    decide,
    following,
    host_asks,
    in_pod,
    inputs,
    logstore,
    model_access,
    observe,
    spending,
    start,
)
from paddock.agentruns.activity import keep_active
from paddock.agentruns.asking import Answered, Asking, choices
from paddock.agentruns.decide import Asked, Ending, Wait, genuine
from paddock.agentruns.ending import DeliveryPendingError, RunEnding
from paddock.agentruns.following import Progress
from paddock.agentruns.holds import hold
from paddock.agentruns.record import LogNameTakenError
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, AgentRunStatus, RunPhase
from paddock.api.common import stored_status
from paddock.api.fields import parse_duration
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.harness import HARNESSES
from paddock.kube import client as kube
from paddock.kube.errors import KubeError, NotFoundError
from paddock.objectstore import errors as store
from paddock.render import run_scripts
from paddock.runs import events as ev
from paddock.runs.events import Draft
from paddock.runs.scrubbing import Scrubber
from paddock.settings import OperatorSettings
from paddock.times import parse_time, utcnow

log = logging.getLogger("paddock.runs")


WAIT_SECONDS = 2.0

Obj = dict[str, Any]


@dataclass
class Execution(RunEnding):
    """The operator's memory of one run between steps; rebuilt from durable state on start."""

    signalled: dict[str, datetime] = field(default_factory=dict)
    touched: datetime | None = None
    wrapper_gone_polls: int = 0
    gated: bool | None = None  # its harness goes through the gate (known once it is found)
    wake: Callable[[bool], None] = lambda urgent: None  # steps the run (its daemon's)
    appended_at: float = 0.0  # when (monotonic) a step last appended journal events
    observer: in_pod.Observer | None = None  # its stream, or exec polls (once it is prepared)
    refuse: tuple[bool, bool] = (False, False)  # the operator refuses model keys, secrets
    started_with: tuple[str, list[str]] | None = None  # (pod uid, its secret env's values)

    @classmethod
    def load(cls, run: Obj, settings: OperatorSettings) -> Execution:
        """From the log and the run as stored (the status this execution then keeps itself);
        the log is in the backend the run's status names, else the settings'."""
        meta = run["metadata"]
        run = kube.get("AgentRun", meta["namespace"], meta["name"]) or run
        run_log, summary, cursor = logstore.load_log(run, settings)
        status, written = stored_status(AgentRunStatus, run), dict(run.get("status") or {})
        gateway = model_access.model_gateway(settings.gateway)  # where a run's model key is held
        stall = timedelta(seconds=settings.run_start_grace_seconds)
        return cls(run, run_log, summary, cursor, status, written=written, gateway=gateway,
                   refuse=settings.refusals, stall_after=stall)  # fmt: skip

    def _stored(self, run: Obj) -> None:
        inputs.seen("MODIFIED", run)  # the runs of its sandbox see it at once, not at its event

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

    # -- before the harness starts: gather, decide, apply ---------------------------------------

    def _start(self, spec: AgentRunSpec, now: datetime) -> float | None:
        world = observe.gather(self.run, spec, self._launched_in)
        held = self.gateway is not None  # the gateway holds the MCP servers' secret headers
        routed = spec.model_key is not None and held
        context = start.Context(self._asking(spec, now), now, routed, *self.refuse, held)
        plan = start.decide_start(world, self.run, spec, context)
        if isinstance(plan, Wait):
            return self._wait(plan)
        if isinstance(plan, Ending):  # (a harness launched before: _launched_in found the sandbox)
            self._end(spec, plan)
            return None
        self.sandbox = plan.sandbox
        self.scrubber = Scrubber([*start.scrubbed_values(world, spec), *self._started(world)])
        if ev.SANDBOX_READY not in self.summary.types_seen:
            self._append([decide.sandbox_ready(plan.sandbox)], later=True)  # with run.started
        if plan.judged is not None:
            metrics.policy_decided([plan.judged], "command")
        if isinstance(plan, start.Approving):
            return self._approving(spec, plan.asked)
        if isinstance(plan, start.Refused):
            self._end(spec, plan.ending)
            return None
        if not plan.launched:
            if plan.asked is not None:  # a person approved its command
                self._approving(spec, plan.asked)
            failure = self._launch(spec, plan, world, now)
            if isinstance(failure, Wait):
                return self._wait(failure)
            if failure is not None:
                self._end(spec, failure)
                return None
        ready, budget = plan.sandbox, plan.budget and plan.budget.to_api()
        data = {"harness": str(spec.harness), "sandbox": ready.name, "pod": ready.pod,
                "policy": ready.policy.label, "budget": budget}  # fmt: skip
        said = f"{spec.harness} started in sandbox {ready.name}"
        self._append([Draft(ev.RUN_STARTED, said, data)])
        self._running(spec, ready, now)
        self._flush(events=False)  # (the event count and last events: with the next change)
        return 0

    def _launched_in(self, sandbox: ReadySandbox) -> bool:
        """Whether the run's harness was launched there before: its digest is stored first,
        and a launch an operator stop interrupted left the run's directory (that harness runs
        on, with the nonce whose digest is in the status)."""
        if self.status.completion_digest is None:
            return False
        self.sandbox = sandbox
        return not self._poll().missing

    def _started(self, world: start.StartWorld) -> list[str]:
        """The values of the sandbox's secret env as its pod started: an exec, once per pod
        (by its uid: a pod made again has the same name), since they cannot change while it
        runs; asked again while it cannot be asked."""
        assert self.sandbox is not None
        if not world.workspace.secret_refs():
            return []
        pod = str(((world.pod or {}).get("metadata") or {}).get("uid") or "")
        if self.started_with is None or not pod or self.started_with[0] != pod:
            found = in_pod.started_secret_values(self.namespace, self.sandbox)
            if found is None:
                return []
            self.started_with = (pod, found)
        return self.started_with[1]

    def _approving(self, spec: AgentRunSpec, asked: Asked) -> float | None:
        """What a person decided of its command into the status and log; the run waits while
        it is pending, and ends if it was refused."""
        self._approvals(spec, asked.answered)
        if asked.answered.drafts:
            self._append(asked.answered.drafts)
        if asked.pending:
            self._flush()
            return WAIT_SECONDS
        if asked.ending is not None:
            self._end(spec, asked.ending)
        return None

    def _running(self, spec: AgentRunSpec, ready: ReadySandbox, now: datetime) -> None:
        """The status of a run whose harness starts: written once, with the digest of its
        nonce, before the harness is launched (then it only changes if the launch fails)."""
        running = f"{spec.harness} is running in sandbox {ready.name}"
        self._write_status(RunPhase.RUNNING, running, ready.name)
        for condition in start.started(ready, self.status.conditions):
            self._condition(*condition)
        self.status.started_at = self.status.started_at or now

    def _wait(self, wait: Wait) -> float:
        self._write_status(wait.phase, wait.message, wait.sandbox, wait.reason)
        for condition in start.waiting(wait):
            self._condition(*condition)
        self._flush()
        return WAIT_SECONDS

    def _launch(
        self, spec: AgentRunSpec, plan: start.Launch, world: start.StartWorld, now: datetime
    ) -> Ending | Wait | None:
        """Hold the sandbox, prepare the run in it, then start the harness with a fresh nonce
        (its digest stored first, in the status that says the run is running); None, or why
        the run waits, or its end."""
        sandbox = plan.sandbox
        held = hold(self.run, sandbox)
        if held is not None:
            return held
        access = model_access.grant(self.run, spec, sandbox, self.gateway, utcnow(), plan.budget,
                                    plan.daily, start.model_key(world, spec))  # fmt: skip
        if isinstance(access, Ending):
            return access
        if access.condition is not None:
            self._condition(C.MODEL_ROUTE, *access.condition)
        routes = credential_access.grant(self.run, spec, sandbox, world.workspace, self.gateway,
                                         utcnow(), start.route_values(world))  # fmt: skip
        if isinstance(routes, Ending):
            return routes
        if routes.condition is not None:
            self._condition(C.CREDENTIAL_ROUTES, *routes.condition)
        invocation = inputs.invocation(spec, world.policy, world.workspace, access, routes)
        unprepared = self._pod().prepare(sandbox, invocation, self.cursor)
        if unprepared:
            return decide.launch_failure(spec, sandbox.pod, 2, unprepared)
        nonce = secrets.token_hex(32)
        self.status.completion_digest = decide.digest(nonce)
        self._running(spec, sandbox, now)
        self._flush(events=False)  # the digest is stored before a harness can end
        env = {e.name: e.value or "" for e in spec.env} | invocation.env
        secret = plan.env | access.env | routes.env
        payload = run_scripts.launch_payload(nonce, env, start.prompt(world, spec), secret)
        result = in_pod.launch(self.namespace, sandbox.pod, self.run_id, payload)
        if result.exit_code == 0:
            return None
        said = self.scrubber.text(result.stderr.strip()[-500:])
        return decide.launch_failure(spec, sandbox.pod, result.exit_code, said)

    # -- while it runs -------------------------------------------------------------------------

    def _poll(self) -> run_scripts.Poll:
        assert self.sandbox is not None
        return in_pod.poll(self.namespace, self.sandbox.pod, self.run_id, self.cursor)

    def _pod(self) -> in_pod.Observer:
        if self.observer is None:
            self.observer = in_pod.Observer(self.namespace, self.run_id, self.wake)
        return self.observer

    def close(self) -> None:
        """Close the run's stream (its daemon stops, or forgets this execution)."""
        if self.observer is not None:
            self.observer.close(shut=True)

    def _finish(self, spec: AgentRunSpec) -> None:
        self.close()
        super()._finish(spec)

    def _gate(self, spec: AgentRunSpec) -> tuple[dict[str, bytes], Ending | None]:
        """The requests the gate waits on, from the sandbox's sidecar, and the run's end when
        the gate's server stopped (its commands are refused: the harness is killed)."""
        assert self.sandbox is not None
        if self.gated is None:
            self.gated = inputs.is_gated(spec, self.sandbox)
        if not self.gated:
            return {}, None
        gate = self._pod().gate(self.sandbox)
        if not gate.server_stopped:
            return gate.requests, None
        in_pod.kill(self.namespace, self.run_id, self.sandbox.pod)
        return gate.requests, decide.gate_lost(self.sandbox.pod, gate.server_age)

    def _follow(self, spec: AgentRunSpec, now: datetime, abort: Ending | None) -> float | None:
        if self.sandbox is None:  # an operator restart: find the sandbox again
            state = inputs.find_sandbox(self.run, spec).state
            if not isinstance(state, ReadySandbox):
                message = f"the sandbox went away while the run was running: {state.message}"
                self._end(spec, decide.sandbox_lost(message))
                return None
            self.sandbox = state
            self.scrubber = inputs.scrubber_for(self.namespace, spec, state)
        used, over = spending.follow(self.run_id, self.namespace, self.sandbox, self.summary, now)
        abort = abort or over
        if abort is not None:
            self._signal(abort, now)
        self.touched = keep_active(self.namespace, self.sandbox.name, now, self.touched)
        digest = self.status.completion_digest
        try:
            poll = self._pod().poll(self.sandbox.pod, self.cursor, lambda n: genuine(n, digest))
        except NotFoundError:
            message = f"the sandbox pod {self.sandbox.pod} is gone; the run's process with it"
            self._end(spec, decide.sandbox_lost(message))
            return None
        progress = Progress(self.sandbox.pod, self.cursor, self.summary,
                            self.status.completion_digest, self.wrapper_gone_polls,
                            max(self.scrubber.longest - 1, 0))  # fmt: skip
        followed = following.follow(spec, poll, HARNESSES[spec.harness].parse_line, progress, abort)
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
            self.appended_at = time.monotonic()
        self._flush()
        self._pod().stored(self.cursor)
        if answered is not None:
            self._pod().answer(self.sandbox, answered)
        if ending is not None:
            self._end(spec, ending)
            return None
        pending = answered is not None and bool(answered.pending)  # (an approval may time out)
        polled = self._pod().by_exec or not self._pod().streaming
        created = parse_time(self.run["metadata"].get("creationTimestamp"))
        deadline = decide.until_deadline(spec, created, now)
        return following.next_step(followed, polled or bool(abort) or pending, deadline)

    def _asking(self, spec: AgentRunSpec, now: datetime) -> Asking:
        return Asking(
            self.status.approvals,
            choices(self.run["metadata"].get("annotations") or {}),
            now,
            parse_duration(spec.approval_timeout),
            spec.approval_timeout,
        )

    def _approvals(self, spec: AgentRunSpec, answered: Answered) -> None:
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
        signal = following.signal_to_send(self.signalled, now)
        if signal is None:
            return
        in_pod.signal(self.namespace, self.sandbox.pod, self.run_id, signal)
        self.signalled[signal] = now
        name = self.run["metadata"]["name"]
        log.info("run %s/%s: sent SIG%s (%s)", self.namespace, name, signal, abort.phase)
