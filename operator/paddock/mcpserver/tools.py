"""What each MCP tool does, for a caller: each checks what it touches (``Caller.may``), acts
through ``kube/``, and returns plain data. Secrets are never read here: statuses hold no secret
value, and run events are scrubbed of the run's Secrets by the operator. A file's content is
returned as it is: reading it needs ``pods/exec`` on the sandbox's pod, which reads every value
the pod holds anyway, and a masked file written back would lose what was masked.

``exec`` is a ``command`` AgentRun, so the operator's exec gate decides it against the
sandbox's SandboxPolicy before it runs, and its output comes from the run's (scrubbed) log."""

from __future__ import annotations

from typing import Any

from paddock.agentruns import logs
from paddock.api.agentrun import Harness
from paddock.api.approvals import APPROVAL_ANNOTATION, ApprovalChoice
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.cli_approve import choose
from paddock.cli_runs import TERMINAL, exit_code, run_manifest
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.kube import watches
from paddock.kube.errors import KubeError
from paddock.mcpserver import files
from paddock.mcpserver.access import (
    AGENTRUNS,
    CONFIGMAPS,
    PODS_EXEC,
    POLICIES,
    SANDBOXES,
    Caller,
    ToolRefusedError,
)
from paddock.policy.engine import PartKind
from paddock.policy.gate import judge_capability
from paddock.render import names
from paddock.runs import events as ev

Obj = dict[str, Any]
MAX_EVENTS = 500  # events one read_events call returns at most
FILE_TIMEOUT = 60.0


def _get(kind: str, namespace: str, name: str) -> Obj:
    found = kube.get(kind, namespace, name)
    if found is None:
        raise ToolRefusedError(f"{kind} {name} not found in namespace {namespace}")
    return found


def _conditions(obj: Obj) -> dict[str, str]:
    status = obj.get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def sandbox_summary(sandbox: Obj) -> Obj:
    meta, spec, status = sandbox["metadata"], sandbox.get("spec") or {}, sandbox.get("status") or {}
    return {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "workspace": (spec.get("workspaceRef") or {}).get("name"),
        "phase": status.get("phase"),
        "reason": status.get("reason"),
        "message": status.get("message"),
        "policy": status.get("policy"),
        "restoredFrom": status.get("restoredFrom"),
        "conditions": _conditions(sandbox),
    }


def run_summary(run: Obj) -> Obj:
    meta, spec, status = run["metadata"], run.get("spec") or {}, run.get("status") or {}
    approvals = [
        {key: a.get(key) for key in ("id", "state", "kind", "target")}
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


# --- sandboxes -------------------------------------------------------------------------------


def list_sandboxes(caller: Caller, namespace: str) -> list[Obj]:
    caller.may("list", SANDBOXES, namespace)
    return [sandbox_summary(s) for s in kube.listed("Sandbox", namespace)]


def get_sandbox(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("get", SANDBOXES, namespace, name)
    return sandbox_summary(_get("Sandbox", namespace, name))


def create_sandbox(
    caller: Caller, namespace: str, name: str, workspace: str, policy: str | None = None
) -> Obj:
    caller.may("create", SANDBOXES, namespace)
    spec: Obj = {"workspaceRef": {"name": workspace}}
    if policy:
        spec["policyRef"] = {"name": policy}
    manifest = {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    made = kube.create(manifest)
    if made is None:
        raise ToolRefusedError(f"Sandbox {name} exists already in namespace {namespace}")
    return sandbox_summary(made)


def delete_sandbox(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("delete", SANDBOXES, namespace, name)
    if not kube.delete("Sandbox", namespace, name):
        raise ToolRefusedError(f"Sandbox {name} not found in namespace {namespace}")
    return {"deleted": name, "namespace": namespace}


def set_paused(caller: Caller, namespace: str, name: str, paused: bool) -> Obj:
    caller.may("patch", SANDBOXES, namespace, name)
    _get("Sandbox", namespace, name)
    kube.patch("Sandbox", namespace, name, {"spec": {"lifecycle": {"paused": paused}}})
    return {"sandbox": name, "paused": paused}


# --- exec and files --------------------------------------------------------------------------


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
    manifest["metadata"]["namespace"] = namespace
    made = kube.create(manifest)
    assert made is not None  # a generated name is never taken
    name = made["metadata"]["name"]
    stdout: list[str] = []
    ending: Obj | None = None
    asked: Obj | None = None
    try:
        for event in logs.events(namespace, name, follow=True):
            if event["type"] == ev.OUTPUT:
                stdout.append(str((event.get("data") or {}).get("text", "")))
            elif event["type"] == ev.APPROVAL_REQUESTED:
                asked = event
                break
            elif event["type"] in TERMINAL:
                ending = event
    finally:
        if asked is None:
            _delete_run(caller, namespace, name)
    if asked is not None:
        return _awaiting_approval(name, asked)
    data = (ending or {}).get("data") or {}
    if data.get("exitCode") is None:
        reason = data.get("reason") or data.get("phase") or "Unknown"
        raise ToolRefusedError(f"{reason}: {data.get('message') or 'the command did not run'}")
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
            "command": data.get("target"),
            "rules": data.get("rules") or [],
        },
        "message": (
            f"The SandboxPolicy says to ask a person before this command runs. AgentRun {run} "
            f"waits for request {data.get('id')}: approve or deny it (the approve and deny "
            f"tools, or paddock approve {run}); read_events of {run} from seq "
            f"{requested['seq'] + 1} then gives its output and exit code."
        ),
    }


def _delete_run(caller: Caller, namespace: str, name: str) -> None:
    try:
        caller.may("delete", AGENTRUNS, namespace, name)
        kube.delete("AgentRun", namespace, name)
    except (KubeError, ToolRefusedError):
        pass  # a caller who may create runs but not delete them keeps the run


def _in_sandbox(caller: Caller, namespace: str, sandbox: str) -> Obj:
    caller.may("get", SANDBOXES, namespace, sandbox)
    found = _get("Sandbox", namespace, sandbox)
    if (found.get("status") or {}).get("phase") != "Ready":
        raise ToolRefusedError(
            f"Sandbox {sandbox} is not Ready ({sandbox_summary(found)['phase']})"
        )
    caller.may("create", PODS_EXEC, namespace, names.pod_name(sandbox), subresource="exec")
    return found


def _run_file_script(
    namespace: str, sandbox: str, path: str, argv: list[str], stdin: str | None = None
) -> str:
    pod = names.pod_name(sandbox)
    done = kube_exec.run(namespace, pod, names.SANDBOX_CONTAINER, argv, stdin, FILE_TIMEOUT)
    if done.exit_code != 0:
        raise ToolRefusedError(files.refusal(path, done.exit_code, done.stderr))
    return done.stdout


def read_file(
    caller: Caller, namespace: str, sandbox: str, path: str, max_bytes: int = files.MAX_READ
) -> Obj:
    _in_sandbox(caller, namespace, sandbox)
    limit = min(max(max_bytes, 0), files.MAX_READ)
    out = _run_file_script(namespace, sandbox, path, files.read_command(path, limit))
    size_line, _, content = out.partition("\n")
    size = int(size_line or 0)
    return {
        "path": path,
        "size": size,
        "content": content,
        "truncated": size > len(content.encode()),
    }


def write_file(caller: Caller, namespace: str, sandbox: str, path: str, content: str) -> Obj:
    found = _in_sandbox(caller, namespace, sandbox)
    data = content.encode()
    if len(data) > files.MAX_WRITE:
        raise ToolRefusedError(f"{len(data)} bytes is more than a write takes ({files.MAX_WRITE})")
    target = f"{files.WORKSPACE}/{files.workspace_path(path)}"
    policy = _policy_of(caller, found)
    if policy is not None:
        judged = judge_capability(policy, PartKind.FILE_WRITE, target)
        if judged.decision != Decision.ALLOW:
            raise ToolRefusedError(judged.message(f"Writing {path}"))
    _run_file_script(namespace, sandbox, path, files.write_command(path, len(data)), content)
    return {"path": path, "written": len(data)}


def list_files(caller: Caller, namespace: str, sandbox: str, path: str = ".") -> Obj:
    _in_sandbox(caller, namespace, sandbox)
    out = _run_file_script(namespace, sandbox, path, files.list_command(path))
    return {"path": path, "entries": files.listing(out)}


def _policy_of(caller: Caller, sandbox: Obj) -> SandboxPolicySpec | None:
    """The policy the sandbox runs under, as its status names it (None: unrestricted)."""
    label = (sandbox.get("status") or {}).get("policy")
    if not label:
        return None
    if label == "inline":
        return SandboxPolicySpec.model_validate((sandbox.get("spec") or {}).get("policy") or {})
    namespace, _, name = label.rpartition("/")
    namespace = namespace or sandbox["metadata"]["namespace"]
    caller.may("get", POLICIES, namespace, name)
    return SandboxPolicySpec.model_validate(
        _get("SandboxPolicy", namespace, name).get("spec") or {}
    )


# --- runs ------------------------------------------------------------------------------------


def start_run(
    caller: Caller,
    namespace: str,
    harness: str,
    prompt: str | None = None,
    command: str | None = None,
    sandbox: str | None = None,
    workspace: str | None = None,
    model: str | None = None,
) -> Obj:
    caller.may("create", AGENTRUNS, namespace)
    if (sandbox is None) == (workspace is None):
        raise ToolRefusedError("give one of sandbox (an existing Sandbox) or workspace")
    manifest = run_manifest(
        harness=harness, prompt=prompt, command=command, sandbox=sandbox, workspace=workspace,
        model=model,
    )  # fmt: skip
    manifest["metadata"]["namespace"] = namespace
    made = kube.create(manifest)
    assert made is not None
    return run_summary(made)


def get_run(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("get", AGENTRUNS, namespace, name)
    return run_summary(_get("AgentRun", namespace, name))


def read_events(
    caller: Caller, namespace: str, name: str, from_seq: int = 0, wait_seconds: int = 0
) -> Obj:
    """The run's events from ``from_seq`` (at most MAX_EVENTS); with ``wait_seconds``, when
    there is none yet, wait that long for the next ones (a watch of the run, not a poll)."""
    caller.may("get", AGENTRUNS, namespace, name)
    caller.may("list", CONFIGMAPS, namespace)
    found = _read(namespace, name, from_seq)
    if not found and wait_seconds > 0:
        run = _get("AgentRun", namespace, name)
        if not _ended(run):
            version = str(run["metadata"]["resourceVersion"])
            for _, seen in watches.watch_one(
                "AgentRun", namespace, name, version, int(wait_seconds)
            ):
                if (seen.get("status") or {}).get("eventCount", 0) > from_seq or _ended(seen):
                    break
            found = _read(namespace, name, from_seq)
    run = _get("AgentRun", namespace, name)
    last = found[-1]["seq"] if found else from_seq - 1
    return {"events": found, "nextSeq": last + 1, "ended": _ended(run) and not _more(run, last)}


def _read(namespace: str, name: str, from_seq: int) -> list[Obj]:
    events: list[Obj] = []
    try:
        for event in logs.events(namespace, name, from_seq):
            events.append(event)
            if len(events) >= MAX_EVENTS:
                break
    except logs.RunNotFoundError as exc:
        raise ToolRefusedError(str(exc)) from None
    return events


def _ended(run: Obj) -> bool:
    return (run.get("status") or {}).get("phase") in (
        "Succeeded",
        "Failed",
        "Cancelled",
        "TimedOut",
    )


def _more(run: Obj, last: int) -> bool:
    return int((run.get("status") or {}).get("eventCount", 0)) > last + 1


def cancel_run(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("patch", AGENTRUNS, namespace, name)
    _get("AgentRun", namespace, name)
    kube.patch("AgentRun", namespace, name, {"spec": {"cancel": True}})
    return {"run": name, "cancel": True}


def decide(
    caller: Caller,
    namespace: str,
    run: str,
    ids: list[str],
    choice: ApprovalChoice,
) -> Obj:
    caller.may("patch", AGENTRUNS, namespace, run)
    chosen = choose(_get("AgentRun", namespace, run), ids, every=False)
    if isinstance(chosen, str):
        raise ToolRefusedError(chosen)
    annotations = {f"{APPROVAL_ANNOTATION}{rid}": str(choice) for rid in chosen}
    kube.patch("AgentRun", namespace, run, {"metadata": {"annotations": annotations}})
    return {"run": run, "decided": chosen, "choice": str(choice)}
