"""The files ConfigMap of a Workspace's sandboxes: the init containers' scripts and the
projected files, named by a hash of what it holds."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from paddock.api.workspace import WorkspaceSpec
from paddock.render.init_scripts import ASKPASS_SCRIPT, CLONE_SCRIPT, render_project_script
from paddock.render.projections import Projection
from paddock.render.setup_script import render_setup_script
from paddock.vocab import names

SHELL_STARTUP_KEY = "shell-startup"
SHELL_STARTUP_TEXT = "# Paddock: read-only in a sandbox (the policy judges what runs).\n"
CONFIGMAP_LIMIT = 900 * 1024  # under the 1 MiB object limit, with room for metadata


def file_key(index: int) -> str:
    return f"project-{index}"


def render_files_configmap(
    namespace: str, workspace_name: str, workspace: WorkspaceSpec, projection: Projection
) -> dict[str, Any]:
    """Scripts and projected files for the init containers, shared by every sandbox of the
    Workspace that renders them the same: named by a hash of what it holds, and immutable
    (a change of the Workspace is a new one; the kubelet need not watch it). Never holds a
    secret value."""
    data = {
        "askpass.sh": ASKPASS_SCRIPT,
        "clone.sh": CLONE_SCRIPT,
        SHELL_STARTUP_KEY: SHELL_STARTUP_TEXT,
        "project.sh": render_project_script(projection),
        "setup.sh": render_setup_script(workspace.setup, workspace.setup_step_timeout),
    }
    for index, content in enumerate(projection.files.values()):
        data[file_key(index)] = content
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    key = hashlib.sha256(canonical).hexdigest()[:16]
    labels = {**names.MANAGED_BY, names.WORKSPACE_LABEL: workspace_name, names.FILES_LABEL: key}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": names.files_configmap_name(workspace_name, key),
            "namespace": namespace,
            "labels": labels,
        },
        "data": data,
        "immutable": True,
    }


def configmap_size(configmap: dict[str, Any]) -> int:
    return sum(len(key) + len(value.encode()) for key, value in configmap["data"].items())
