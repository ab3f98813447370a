"""What a Workspace gives the agent reaches the real agent CLIs ungated (no policy), on kwok:
each of Claude Code, Codex, OpenCode and Gemini CLI sends its model the Workspace's
instructions and a skill's description, and offers the tool of the Workspace's MCP server (a
real one, the official SDK's). kwok runs no init containers, so the test runs the pod's own
``project`` init container script, with the sandbox's ConfigMap, in the pod first. Gated runs
read the same through the real init container, in the real node's fence test
(tests/e2e/test_real_node_fence.py)."""

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


def test_every_ungated_cli_reads_the_workspace_instructions_skills_and_mcp(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, tmp_path: Path
) -> None:
    with mcp_probe.serve("127.0.0.1") as mcp_url, ScriptedModel([]) as model:
        cluster.apply(projected_workspace(mcp_url), namespace)
        cluster.apply(sandbox("ungated", "app"), namespace)
        wait_for_phase(cluster, namespace, "ungated", "Ready")
        project_on_kwok(cluster, namespace, "ungated", tmp_path / "ungated")
        missed = unread(cluster, namespace, ["ungated"], model)
    assert not missed, json.dumps(missed, indent=1)
