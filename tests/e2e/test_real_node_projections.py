"""What a Workspace gives the agent reaches the real agent CLIs through a gate, on the local
cluster's real node: the published sandbox image, the ``project`` init container writing the
workspace, and a policy's fence (the model and MCP servers on this host's bridge address, named
in the policy's egress). Each of Claude Code, Codex, OpenCode and Gemini CLI sends its model the
Workspace's instructions and a skill's description, and offers the tool of the Workspace's MCP
server (a real one, the official SDK's). Ungated runs are tested on kwok
(tests/integration/test_agent_cli_projections.py): a sandbox without a policy cannot reach this
host's address, as the fence of no policy leaves the cluster's own addresses out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from paddock.devcluster import cluster as local
from paddock.devcluster import node
from support import mcp_probe
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.projections import projected_workspace, unread
from support.real_node import ON_NODE
from support.sandboxes import sandbox, wait_for_phase

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]


def _port(url: str) -> int:
    return int(url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def test_every_gated_cli_reads_the_workspace_instructions_skills_and_mcp_on_the_real_node(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    image = local.load_image(local.default_state_dir(), "sandbox")
    host = node.host_ip()
    assert host is not None
    with mcp_probe.serve(host) as mcp_url, ScriptedModel([], host=host) as model:
        ports = [{"port": _port(url)} for url in (mcp_url, model.url)]
        policy = {
            "commands": {"default": "allow"},
            "network": {"egress": [{"cidrs": [f"{host}/32"], "ports": ports}]},
        }
        storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
        box = sandbox("gated", "app", image=image, storage=storage, policy=policy, **ON_NODE)
        cluster.apply(projected_workspace(mcp_url), namespace)
        cluster.apply(box, namespace)
        wait_for_phase(cluster, namespace, "gated", "Ready", timeout=180)
        missed = unread(cluster, namespace, ["gated"], model)
    assert not missed, json.dumps(missed, indent=1)
