"""Sandboxes for a caller: list, read, make, delete, pause, and their files. Each operation
checks what it touches (``Caller.may``), acts through ``kube/``, and returns plain data. A
file's content is returned as it is: reading it needs ``pods/exec`` on the sandbox's pod,
which reads every value the pod holds anyway, and a masked file written back would lose what
was masked."""

from __future__ import annotations

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.workspace import WorkspaceSpec
from paddock.client import files
from paddock.client.access import (
    PODS_EXEC,
    POLICIES,
    SANDBOXES,
    WORKSPACES,
    Caller,
    RefusedError,
)
from paddock.client.common import Obj, conditions, get
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.policy.engine import PartKind, evaluate
from paddock.policy.gate import judge_capability
from paddock.vocab import names

FILE_TIMEOUT = 60.0


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
        "conditions": conditions(sandbox),
    }


def list_sandboxes(caller: Caller, namespace: str) -> list[Obj]:
    caller.may("list", SANDBOXES, namespace)
    return [sandbox_summary(s) for s in kube.listed("Sandbox", namespace)]


def get_sandbox(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("get", SANDBOXES, namespace, name)
    return sandbox_summary(get("Sandbox", namespace, name))


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
        raise RefusedError(f"Sandbox {name} exists already in namespace {namespace}")
    return sandbox_summary(made)


def delete_sandbox(caller: Caller, namespace: str, name: str) -> Obj:
    caller.may("delete", SANDBOXES, namespace, name)
    if not kube.delete("Sandbox", namespace, name):
        raise RefusedError(f"Sandbox {name} not found in namespace {namespace}")
    return {"deleted": name, "namespace": namespace}


def set_paused(caller: Caller, namespace: str, name: str, paused: bool) -> Obj:
    caller.may("patch", SANDBOXES, namespace, name)
    get("Sandbox", namespace, name)
    kube.patch("Sandbox", namespace, name, {"spec": {"lifecycle": {"paused": paused}}})
    return {"sandbox": name, "paused": paused}


def _in_sandbox(caller: Caller, namespace: str, sandbox: str) -> Obj:
    caller.may("get", SANDBOXES, namespace, sandbox)
    found = get("Sandbox", namespace, sandbox)
    if (found.get("status") or {}).get("phase") != "Ready":
        raise RefusedError(f"Sandbox {sandbox} is not Ready ({sandbox_summary(found)['phase']})")
    caller.may("create", PODS_EXEC, namespace, names.pod_name(sandbox), subresource="exec")
    return found


def _run_file_script(
    namespace: str, sandbox: str, path: str, argv: list[str], stdin: str | None = None
) -> str:
    pod = names.pod_name(sandbox)
    done = kube_exec.run(namespace, pod, names.SANDBOX_CONTAINER, argv, stdin, FILE_TIMEOUT)
    if done.exit_code != 0:
        raise RefusedError(files.refusal(path, done.exit_code, done.stderr))
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
        raise RefusedError(f"{len(data)} bytes is more than a write takes ({files.MAX_WRITE})")
    target = f"{files.WORKSPACE}/{files.workspace_path(path)}"
    policy = _policy_of(caller, found)
    if policy is not None:
        judged = judge_capability(policy, PartKind.FILE_WRITE, target)
        if judged.decision != Decision.ALLOW:
            raise RefusedError(judged.message(f"Writing {path}"))
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
    return SandboxPolicySpec.model_validate(get("SandboxPolicy", namespace, name).get("spec") or {})


def check_command(caller: Caller, namespace: str, sandbox: str, command: str) -> Obj:
    """What the sandbox's SandboxPolicy says to ``command`` (``paddock policy check``, with the
    policy and the Workspace's scripts the sandbox runs with): its verdict, each part's, and
    one line saying why. Nothing runs."""
    caller.may("get", SANDBOXES, namespace, sandbox)
    found = get("Sandbox", namespace, sandbox)
    policy = _policy_of(caller, found)
    if policy is None:
        why = f"allow: Sandbox {sandbox} runs under no SandboxPolicy"
        return {"command": command, "verdict": str(Decision.ALLOW), "parts": [], "explain": why}
    workspace = ((found.get("spec") or {}).get("workspaceRef") or {}).get("name")
    scripts: dict[str, str] = {}
    if workspace:
        caller.may("get", WORKSPACES, namespace, workspace)
        body = get("Workspace", namespace, workspace).get("spec") or {}
        scripts = WorkspaceSpec.model_validate(body).scripts
    verdict = evaluate(policy, command, scripts)
    return {"command": command, **verdict.as_json(), "explain": verdict.explain()}
