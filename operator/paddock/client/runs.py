"""Runs for a caller: build one, start it, read it and its events, cancel it, and ``exec``
(a ``command`` AgentRun: the operator's exec gate decides it against the sandbox's
SandboxPolicy before it runs, and its output comes from the run's log). Events are scrubbed of
the run's Secrets by the operator; statuses hold no secret value."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from paddock import API_VERSION
from paddock.api.agentrun import Harness
from paddock.api.approvals import visible
from paddock.client import logs
from paddock.client.access import AGENTRUNS, CONFIGMAPS, Caller, RefusedError
from paddock.client.common import Obj, as_they_change, get
from paddock.kube import client as kube
from paddock.kube import watches
from paddock.kube.errors import KubeError
from paddock.runs import events as ev

TERMINAL = (ev.RUN_COMPLETED, ev.RUN_FAILED, ev.RUN_ABORTED)
ENDED_PHASES = ("Succeeded", "Failed", "Cancelled", "TimedOut")
# Exit codes of exec when the command did not give one: as a shell's.
EXIT_NOT_RUN, EXIT_TIMED_OUT, EXIT_CANCELLED = 126, 124, 130
MAX_EVENTS = 500  # events one read_events call returns at most


@dataclass(frozen=True)
class Delivering:
    """A run's delivery (its spec.deliver), as the CLI and the MCP server take it: ``secret``
    is the token's Secret, ``NAME`` (key ``token``) or ``NAME:KEY``."""

    secret: str
    branch: str | None = None
    pull_request: bool = False
    base: str | None = None
    title: str | None = None
    draft: bool = False
    forge: str | None = None
    always: bool = False

    def spec(self) -> Obj:
        name, _, key = self.secret.partition(":")
        spec: Obj = {"credentialsSecret": {"name": name, "key": key or "token"}}
        if self.branch:
            spec["branch"] = self.branch
        if self.forge:
            spec["forge"] = self.forge
        if self.always:
            spec["onlyIf"] = "always"
        if self.pull_request or self.base or self.title or self.draft:
            asked = {"base": self.base, "title": self.title, "draft": self.draft or None}
            spec["pullRequest"] = {key: value for key, value in asked.items() if value}
        return spec


def run_manifest(
    *,
    harness: str,
    prompt: str | None = None,
    command: str | None = None,
    sandbox: str | None = None,
    workspace: str | None = None,
    model: str | None = None,
    timeout: str | None = None,
    prefix: str = "run-",
    deliver: Delivering | None = None,
) -> Obj:
    """An AgentRun of ``harness`` in the Sandbox ``sandbox``, or in a fresh one of the
    Workspace ``workspace``; named by the API server from ``prefix``."""
    spec: Obj = {"harness": harness}
    if sandbox:
        spec["sandboxRef"] = {"name": sandbox}
    else:
        spec["sandboxTemplate"] = {"workspaceRef": {"name": workspace}}
    for key, value in (("prompt", prompt), ("command", command), ("model", model)):
        if value is not None:
            spec[key] = value
    if timeout:
        spec["timeout"] = timeout
    if deliver is not None:
        spec["deliver"] = deliver.spec()
    meta = {"generateName": prefix, "labels": {"app.kubernetes.io/created-by": "paddock-cli"}}
    return {"apiVersion": API_VERSION, "kind": "AgentRun", "metadata": meta, "spec": spec}


def exit_code(ending: Obj | None) -> int:
    """What ``exec`` exits with for a run's terminal event (None: the run ended without one)."""
    data = (ending or {}).get("data") or {}
    code = data.get("exitCode")
    if isinstance(code, int):
        return code
    phase = data.get("phase")
    if phase == "TimedOut":
        return EXIT_TIMED_OUT
    if phase == "Cancelled":
        return EXIT_CANCELLED
    return EXIT_NOT_RUN  # refused by the policy, the sandbox gone, ...


def run_summary(run: Obj) -> Obj:
    meta, spec, status = run["metadata"], run.get("spec") or {}, run.get("status") or {}
    approvals = [
        {key: a.get(key) for key in ("id", "state", "kind", "digest")}
        | {"target": visible(str(a.get("target") or ""))}
        for a in status.get("approvals") or []
    ]
    return {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "harness": spec.get("harness"),
        "sandbox": status.get("sandboxName") or (spec.get("sandboxRef") or {}).get("name"),
        "phase": status.get("phase"),
        "reason": status.get("reason"),
        "message": status.get("message"),
        "exitCode": status.get("exitCode"),
        "eventCount": status.get("eventCount", 0),
        "approvals": approvals,
    }


def exec_command(
    caller: Caller, namespace: str, sandbox: str, command: str, timeout_seconds: int = 300
) -> Obj:
    """Run ``command`` as a command run in the sandbox and wait for it; the run is deleted
    once its outcome is read. A command the policy says to ask about returns at once with
    the pending request: the run waits for a person, and is kept."""
    caller.may("create", AGENTRUNS, namespace)
    caller.may("get", AGENTRUNS, namespace)
    caller.may("list", CONFIGMAPS, namespace)
    manifest = run_manifest(
        harness=Harness.COMMAND,
        command=command,
        sandbox=sandbox,
        timeout=f"{max(int(timeout_seconds), 1)}s",
        prefix="exec-",
    )
    name = create_run(caller, namespace, manifest)["metadata"]["name"]
    stdout: list[str] = []
    ending: Obj | None = None
    asked: Obj | None = None
    try:
        for event in events(caller, namespace, name, follow=True):
            if event["type"] == ev.OUTPUT:
                stdout.append(str((event.get("data") or {}).get("text", "")))
            elif event["type"] == ev.APPROVAL_REQUESTED:
                asked = event
                break
            elif event["type"] in TERMINAL:
                ending = event
    finally:
        if asked is None:
            with contextlib.suppress(KubeError, RefusedError):
                delete_run(caller, namespace, name)  # who may not delete runs keeps it
    if asked is not None:
        return _awaiting_approval(name, asked)
    data = (ending or {}).get("data") or {}
    if data.get("exitCode") is None:
        reason = data.get("reason") or data.get("phase") or "Unknown"
        raise RefusedError(f"{reason}: {data.get('message') or 'the command did not run'}")
    return {
        "exitCode": exit_code(ending),
        "stdout": "\n".join(stdout) + ("\n" if stdout else ""),
        "stderr": str(data.get("stderrTail") or ""),
    }


def _awaiting_approval(run: str, requested: Obj) -> Obj:
    """What ``exec`` returns for a command that waits for a person's approval."""
    data = requested.get("data") or {}
    return {
        "pendingApproval": {
            "run": run,
            "id": data.get("id"),
            "command": visible(str(data.get("target") or "")),
            "digest": data.get("digest"),
            "rules": data.get("rules") or [],
        },
        "message": (
            f"The SandboxPolicy says to ask a person before this command runs. AgentRun {run} "
            f"waits for request {data.get('id')}: approve or deny it (the approve and deny "
            f"tools, or paddock approve {run}); read_events of {run} from seq "
            f"{requested['seq'] + 1} then gives its output and exit code."
        ),
    }


def create_run(caller: Caller, namespace: str, manifest: Obj) -> Obj:
    """Create the AgentRun ``manifest`` (a ``run_manifest``) in ``namespace``; the run made."""
    caller.may("create", AGENTRUNS, namespace)
    manifest["metadata"]["namespace"] = namespace
    made = kube.create(manifest)
    assert made is not None  # a generated name is never taken
    return made


def delete_run(caller: Caller, namespace: str, name: str) -> None:
    caller.may("delete", AGENTRUNS, namespace, name)
    kube.delete("AgentRun", namespace, name)


class LogUnreadableError(RefusedError):
    """A run's log cannot be read (no such run, or its object store refuses)."""


def events(
    caller: Caller,
    namespace: str,
    name: str,
    from_seq: int = 0,
    *,
    follow: bool = False,
    check: Callable[[], None] | None = None,
) -> Iterator[Obj]:
    """The run's events from ``from_seq`` on; with ``follow``, then each as it comes until
    the run ends (the log replayed, then followed from a watch), ``check`` (raising once the
    caller may no longer read it) called at least every 30 s meanwhile."""
    caller.may("get", AGENTRUNS, namespace, name)
    caller.may("list", CONFIGMAPS, namespace)
    return _logged(namespace, name, from_seq, follow, check)


def _logged(
    namespace: str, name: str, from_seq: int, follow: bool, check: Callable[[], None] | None
) -> Iterator[Obj]:
    try:
        yield from logs.events(namespace, name, from_seq, follow=follow, check=check)
    except logs.RunNotFoundError as exc:
        raise LogUnreadableError(str(exc)) from None
    except logs.ObjectStoreError as exc:
        raise LogUnreadableError(f"the run's log could not be read: {exc.message}") from None


def start_run(
    caller: Caller,
    namespace: str,
    harness: str,
    prompt: str | None = None,
    command: str | None = None,
    sandbox: str | None = None,
    workspace: str | None = None,
    model: str | None = None,
    deliver: Delivering | None = None,
) -> Obj:
    if (sandbox is None) == (workspace is None):
        raise RefusedError("give one of sandbox (an existing Sandbox) or workspace")
    manifest = run_manifest(
        harness=harness, prompt=prompt, command=command, sandbox=sandbox, workspace=workspace,
        model=model, deliver=deliver,
    )  # fmt: skip
    return run_summary(create_run(caller, namespace, manifest))


def get_run(caller: Caller, namespace: str, name: str) -> Obj:
    return run_summary(read_run(caller, namespace, name))


def read_run(caller: Caller, namespace: str, name: str) -> Obj:
    """The AgentRun itself (statuses hold no secret value)."""
    caller.may("get", AGENTRUNS, namespace, name)
    return get("AgentRun", namespace, name)


def read_events(
    caller: Caller, namespace: str, name: str, from_seq: int = 0, wait_seconds: int = 0
) -> Obj:
    """The run's events from ``from_seq`` (at most MAX_EVENTS); with ``wait_seconds``, when
    there is none yet, wait that long for the next ones (a watch of the run, not a poll)."""
    caller.may("get", AGENTRUNS, namespace, name)
    caller.may("list", CONFIGMAPS, namespace)
    found = _read(namespace, name, from_seq)
    if not found and wait_seconds > 0:
        run = get("AgentRun", namespace, name)
        if not _ended(run):
            version = str(run["metadata"]["resourceVersion"])
            for _, seen in watches.watch_one(
                "AgentRun", namespace, name, version, int(wait_seconds)
            ):
                if (seen.get("status") or {}).get("eventCount", 0) > from_seq or _ended(seen):
                    break
            found = _read(namespace, name, from_seq)
    run = get("AgentRun", namespace, name)
    last = found[-1]["seq"] if found else from_seq - 1
    return {"events": found, "nextSeq": last + 1, "ended": _ended(run) and not _more(run, last)}


def _read(namespace: str, name: str, from_seq: int) -> list[Obj]:
    found: list[Obj] = []
    for event in _logged(namespace, name, from_seq, False, None):
        found.append(event)
        if len(found) >= MAX_EVENTS:
            break
    return found


def _ended(run: Obj) -> bool:
    return (run.get("status") or {}).get("phase") in ENDED_PHASES


def _more(run: Obj, last: int) -> bool:
    return int((run.get("status") or {}).get("eventCount", 0)) > last + 1


def cancel_run(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("patch", AGENTRUNS, namespace, name)
    get("AgentRun", namespace, name)
    kube.patch("AgentRun", namespace, name, {"spec": {"cancel": True}})
    return {"run": name, "cancel": True}


def runs_as_they_change(
    caller: Caller, namespace: str, check: Callable[[], None] | None = None
) -> Iterator[list[Obj]]:
    """The namespace's runs, newest first, again after each change (a watch, not a poll);
    ``check`` (raising once the caller may no longer) is called at least every 30 s."""
    caller.may("list", AGENTRUNS, namespace)
    caller.may("watch", AGENTRUNS, namespace)
    return as_they_change("AgentRun", namespace, check)


def ended(namespace: str, name: str, timeout_seconds: int = 60) -> Obj:
    """The run once its status says it ended (its log's terminal event is written just before
    its status), or as it is after ``timeout_seconds``. The caller has checked it may get it."""
    run = get("AgentRun", namespace, name)
    if _ended(run):
        return run
    version = str(run["metadata"]["resourceVersion"])
    for _, seen in watches.watch_one("AgentRun", namespace, name, version, timeout_seconds):
        if _ended(seen):
            return seen
    return get("AgentRun", namespace, name)
