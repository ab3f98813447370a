"""What a Workspace gives the agent reaches the real agent CLIs, gated (a policy) and ungated
(none), on kwok: each of Claude Code, Codex, OpenCode and Gemini CLI sends its model the
Workspace's instructions and a skill's description, and offers the tool of the Workspace's MCP
server (a real one, the official SDK's). kwok runs no init containers, so the test runs the
pod's own ``project`` init container script, with the sandbox's ConfigMap, in each pod first;
the real node's test (tests/e2e/test_real_node_projections.py) has the real init container."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support import mcp_probe
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.projections import projected_workspace, unread
from support.sandboxes import project_on_kwok, sandbox, wait_for_phase

pytestmark = pytest.mark.integration


def test_every_cli_gated_and_ungated_reads_the_workspace_instructions_skills_and_mcp(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, tmp_path: Path
) -> None:
    with mcp_probe.serve("127.0.0.1") as mcp_url, ScriptedModel([]) as model:
        cluster.apply(projected_workspace(mcp_url), namespace)
        cluster.apply(sandbox("ungated", "app"), namespace)
        cluster.apply(sandbox("gated", "app", policy={"commands": {"default": "allow"}}), namespace)
        for box in ("ungated", "gated"):
            wait_for_phase(cluster, namespace, box, "Ready")
            project_on_kwok(cluster, namespace, box, tmp_path / box)
        missed = unread(cluster, namespace, ["ungated", "gated"], model)
    assert not missed, json.dumps(missed, indent=1)
