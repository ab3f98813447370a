"""The objects of one Sandbox: its files ConfigMap, workspace PVC and pod."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paddock.api.common import SecretKeySelector
from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.render.containers import (
    CONTAINER_SECURITY,
    CONTROL_DIR,
    KEEP_ALIVE,
    RUN_DIR,
    gate_container,
    mount,
)
from paddock.render.files import SHELL_STARTUP_KEY, file_key, render_files_configmap
from paddock.render.init_scripts import (
    SECRET_ENV_VAR,
)
from paddock.render.projections import Projection, render_projection
from paddock.render.snapshot import is_archive, restore_size, snapshot_hash
from paddock.vocab import names

WORKSPACE_DIR = "/workspace"
HOME_DIR = "/home/paddock"
FILES_DIR = "/paddock/files"
SANDBOX_UID = 1000
# The shell's startup files in the sandbox's HOME, mounted read-only (empty but for a comment):
# Claude Code's shell sources ~/.bashrc and keeps its functions and aliases, and a login
# shell reads ~/.profile, so what the agent wrote there would run, or change what a command
# the policy judged runs, in the runs that come after.
SHELL_STARTUP = (".bashrc", ".bash_profile", ".bash_login", ".profile", ".bash_logout")


# The workspace volume's root belongs to whoever provisioned it (often root), its files to the
# sandbox user: git (2.35.2 and later) refuses such a repository unless it is named safe, in a
# protected scope; GIT_CONFIG_* is the command-line scope, honoured from git 2.38.
GIT_SAFE_WORKSPACE = [
    {"name": "GIT_CONFIG_COUNT", "value": "1"},
    {"name": "GIT_CONFIG_KEY_0", "value": "safe.directory"},
    {"name": "GIT_CONFIG_VALUE_0", "value": WORKSPACE_DIR},
]


@dataclass(frozen=True)
class SandboxInputs:
    """Everything a sandbox's objects are rendered from."""

    name: str
    namespace: str
    sandbox: SandboxSpec
    workspace: WorkspaceSpec
    image: str
    workspace_hash: str
    proxy: str | None = None  # the egress gateway, where the sandbox reaches the web through it
    model_host: str | None = None  # the gateway's model route's host: reached without the proxy
    mcp_held: bool = False  # the gateway holds the MCP servers' secret headers, not the pod
    fence: str = ""  # the pod's paddock.dev/network label: the NetworkPolicy it is under


def _secret_env(name: str, ref: SecretKeySelector) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


def _secret_names(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Which of the container's variables hold secret values, for its scripts to mask."""
    secret = [var["name"] for var in env if "secretKeyRef" in var.get("valueFrom", {})]
    return [{"name": SECRET_ENV_VAR, "value": " ".join(secret)}] if secret else []


# Hosts a sandbox reaches without the gateway: itself. Everything else that is not the web
# (an in-cluster mirror of network.egress) is named by address, which curl, git and npm
# send through the proxy too, where the gateway refuses it: such a tool is told NO_PROXY.
NO_PROXY = "localhost,127.0.0.1,::1"


def _proxy_env(proxy: str | None, model_host: str | None) -> list[dict[str, Any]]:
    """The variables that send HTTP and HTTPS through the egress gateway, in both spellings
    tools read; the gateway's model route is reached directly (the proxy would refuse it)."""
    if proxy is None:
        return []
    direct = NO_PROXY + (f",{model_host}" if model_host else "")
    pairs = [("HTTP_PROXY", proxy), ("HTTPS_PROXY", proxy), ("NO_PROXY", direct)]
    env = [{"name": n, "value": v} for name, v in pairs for n in (name, name.lower())]
    # Node.js's own fetch reads the variables only when told to (Node 22.21 and later).
    return [*env, {"name": "NODE_USE_ENV_PROXY", "value": "1"}]


def _workspace_env(workspace: WorkspaceSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": var.name, "value": var.value} for var in workspace.env]
    env += [_secret_env(var.name, var.secret_key_ref) for var in workspace.secrets]
    return env


def render_workspace_pvc(
    inputs: SandboxInputs, restore: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The workspace volume: empty, restored from the VolumeSnapshot ``restore``, or empty and
    annotated with the archive ``restore`` to be unpacked into it. Its label says which
    workspace hash the volume holds (the snapshot's, for a restore)."""
    storage = inputs.sandbox.storage
    archive = restore is not None and is_archive(restore)
    size = str(storage.size)
    if restore is not None and not archive:
        size = restore_size(storage.size, restore)
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    volume_hash = inputs.workspace_hash
    annotations: dict[str, str] = {}
    if restore is not None:
        volume_hash = snapshot_hash(restore) or volume_hash
        if archive:
            annotations[names.RESTORE_ARCHIVE_ANNOTATION] = restore["metadata"]["name"]
        else:
            spec["dataSource"] = {
                "apiGroup": "snapshot.storage.k8s.io",
                "kind": "VolumeSnapshot",
                "name": restore["metadata"]["name"],
            }
    metadata: dict[str, Any] = {
        "name": names.pvc_name(inputs.name),
        "namespace": inputs.namespace,
        "labels": {**names.sandbox_labels(inputs.name), names.WORKSPACE_HASH_LABEL: volume_hash},
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def _container(
    name: str,
    inputs: SandboxInputs,
    *,
    command: list[str],
    env: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": inputs.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "workingDir": WORKSPACE_DIR,
        "env": [
            {"name": "HOME", "value": HOME_DIR},
            *GIT_SAFE_WORKSPACE,
            *_proxy_env(inputs.proxy, inputs.model_host),
            *env,
            *_secret_names(env),
        ],
        "volumeMounts": mounts,
        "securityContext": CONTAINER_SECURITY,
        # Only what Paddock's scripts write, with secret values masked; never the log's tail
        # (FallbackToLogsOnError would put whatever a step printed into the pod's status).
        "terminationMessagePolicy": "File",
    }
    resources = inputs.sandbox.resources.to_api()
    if resources:
        container["resources"] = {
            k: {n: str(q) for n, q in v.items()} for k, v in resources.items()
        }
    return container


def _init_containers(inputs: SandboxInputs, projection: Projection) -> list[dict[str, Any]]:
    common = [
        mount("workspace", WORKSPACE_DIR),
        mount("home", HOME_DIR),
        mount("tmp", "/tmp"),  # noqa: S108  (an emptyDir, private to the pod)
        mount("files", FILES_DIR, read_only=True),
    ]

    # The outer shell keeps the script from being PID 1, which ignores signals it does not
    # handle: the setup watchdog must be able to stop it.
    def run(script: str) -> list[str]:
        return ["/bin/bash", "-c", f"/bin/bash {FILES_DIR}/{script}; exit $?"]

    containers = []
    git = inputs.workspace.source.git if inputs.workspace.source else None
    if git is not None:
        env: list[dict[str, Any]] = [
            {"name": "GIT_URL", "value": git.url},
            {"name": "GIT_DEPTH", "value": str(git.depth)},
            {"name": "GIT_TERMINAL_PROMPT", "value": "0"},
            {"name": "GIT_ASKPASS", "value": f"{FILES_DIR}/askpass.sh"},
        ]
        if git.ref:
            env.append({"name": "GIT_REF", "value": git.ref})
        if git.secret_ref is not None:
            env += [
                {"name": "PADDOCK_ASKPASS_TOKEN_VAR", "value": "PADDOCK_GIT_TOKEN"},
                _secret_env("PADDOCK_GIT_TOKEN", git.secret_ref),
            ]
        containers.append(
            _container("clone", inputs, command=run("clone.sh"), env=env, mounts=common)
        )
    skill_env = [
        {"name": "GIT_TERMINAL_PROMPT", "value": "0"},
        {"name": "GIT_ASKPASS", "value": f"{FILES_DIR}/askpass.sh"},
    ] + [
        _secret_env(checkout.token_env, projection.secret_env[checkout.token_env])
        for checkout in projection.git_checkouts
        if checkout.token_env
    ]
    containers.append(
        _container("project", inputs, command=run("project.sh"), env=skill_env, mounts=common)
    )
    if inputs.workspace.setup:
        containers.append(
            _container(
                "setup",
                inputs,
                command=run("setup.sh"),
                env=_workspace_env(inputs.workspace),
                mounts=common,
            )
        )
    return containers


def _main_container(inputs: SandboxInputs, projection: Projection) -> dict[str, Any]:
    """The container runs exec into: kept alive, with the workspace's env and secrets."""
    env = _workspace_env(inputs.workspace)
    skill_tokens = {c.token_env for c in projection.git_checkouts}
    # With a gateway that serves credential routes, the MCP servers' secret headers are the
    # gateway's: each run's route to a server adds them.
    held = projection.gateway_held if inputs.mcp_held else set()
    env += [
        _secret_env(var, ref)
        for var, ref in projection.secret_env.items()
        if var not in skill_tokens | held  # a skill's token: the project init container's only
    ]
    # ($$: the kubelet would expand a $(NAME) in a value, an earlier variable's value in it)
    env += [{"name": v, "value": url.replace("$", "$$")} for v, url in projection.env.items()]
    env += [
        {"name": "PADDOCK_SANDBOX", "value": inputs.name},
        {"name": "PADDOCK_WORKSPACE", "value": WORKSPACE_DIR},
        {"name": "PADDOCK_RUN_DIR", "value": RUN_DIR},
        {"name": "PADDOCK_CONTROL_DIR", "value": CONTROL_DIR},
    ]
    startup = [
        {**mount("files", f"{HOME_DIR}/{name}", read_only=True), "subPath": SHELL_STARTUP_KEY}
        for name in SHELL_STARTUP
    ]
    return _container(
        names.SANDBOX_CONTAINER,
        inputs,
        command=KEEP_ALIVE,
        env=env,
        mounts=[
            mount("workspace", WORKSPACE_DIR),
            mount("home", HOME_DIR),
            mount("tmp", "/tmp"),  # noqa: S108
            # Run journals: an emptyDir, never part of the workspace volume or its snapshots.
            mount("run", RUN_DIR),
            mount("control", CONTROL_DIR, read_only=True),
            *startup,
        ],
    )


def _volumes(inputs: SandboxInputs, projection: Projection, files: str) -> list[dict[str, Any]]:
    files_items = [
        {"key": key, "path": key}
        for key in ("askpass.sh", "clone.sh", "project.sh", "setup.sh", SHELL_STARTUP_KEY)
    ]
    files_items += [
        {"key": file_key(index), "path": f"project/{path}"}
        for index, path in enumerate(projection.files)
    ]
    return [
        {"name": "workspace", "persistentVolumeClaim": {"claimName": names.pvc_name(inputs.name)}},
        {"name": "home", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "run", "emptyDir": {}},
        {"name": "control", "emptyDir": {}},
        {"name": "gate", "emptyDir": {}},
        {
            "name": "files",
            "configMap": {
                "name": files,
                "items": files_items,
                "defaultMode": 0o555,
            },
        },
    ]


def _placement(sandbox: SandboxSpec) -> dict[str, Any]:
    """Runtime class and scheduling, passed through from the Sandbox's spec."""
    placement: dict[str, Any] = {}
    if sandbox.runtime_class_name:
        placement["runtimeClassName"] = sandbox.runtime_class_name
    if sandbox.node_selector:
        placement["nodeSelector"] = dict(sandbox.node_selector)
    if sandbox.tolerations:
        placement["tolerations"] = [t.to_api() for t in sandbox.tolerations]
    if sandbox.affinity:
        placement["affinity"] = sandbox.affinity
    return placement


def render_sandbox_pod(
    inputs: SandboxInputs, projection: Projection, *, prepared: bool, files: str
) -> dict[str, Any]:
    """The sandbox pod, which mounts the files ConfigMap ``files``. ``prepared``: the volume
    already holds the cloned, set-up workspace (a resumed or restored sandbox), so no init
    container runs."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 10,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SANDBOX_UID,
            "runAsGroup": SANDBOX_UID,
            "fsGroup": SANDBOX_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_main_container(inputs, projection)],
        "initContainers": [
            *([] if prepared else _init_containers(inputs, projection)),
            gate_container(inputs.image),
        ],
        "volumes": _volumes(inputs, projection, files),
    }
    spec |= _placement(inputs.sandbox)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": names.pod_name(inputs.name),
            "namespace": inputs.namespace,
            "labels": {
                **names.sandbox_labels(inputs.name),
                names.WORKSPACE_HASH_LABEL: inputs.workspace_hash,
                **({names.NETWORK_LABEL: inputs.fence} if inputs.fence else {}),
            },
            "annotations": {names.PREPARED_ANNOTATION: "true" if prepared else "false"},
        },
        "spec": spec,
    }


def render_sandbox(inputs: SandboxInputs, *, prepared: bool) -> dict[str, dict[str, Any]]:
    """The ConfigMap, PVC and pod of a sandbox, by kind."""
    projection = render_projection(inputs.workspace)
    workspace_name = inputs.sandbox.workspace_ref.name
    files = render_files_configmap(inputs.namespace, workspace_name, inputs.workspace, projection)
    name = files["metadata"]["name"]
    return {
        "ConfigMap": files,
        "PersistentVolumeClaim": render_workspace_pvc(inputs),
        "Pod": render_sandbox_pod(inputs, projection, prepared=prepared, files=name),
    }
