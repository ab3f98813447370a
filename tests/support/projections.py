"""Whether the real agent CLIs read what a Workspace projects: its instructions, an agent
skill's description and the tool of its MCP server, as seen in the requests they send the
scripted model server. Shared by the kwok test (gated and ungated) and the real node's fence
test (gated, with the image and the real init containers)."""

from __future__ import annotations

import json
from typing import Any

from support import mcp_probe
from support.harnesses import harness_fields
from support.kube import Cluster
from support.model_server import Call, ScriptedModel
from support.runs import agent_run, wait_for_run
from support.sandboxes import workspace

HARNESSES = ["claude-code", "codex", "opencode", "gemini"]
INSTRUCTIONS_MARK = "instructions-marker-5e81"
SKILL_MARK = "skill-marker-9c04"
# Claude Code offers a Workspace's MCP tools only once its servers are up, after its first
# request: its script calls the tool, which waits for them (support.model_server).
CLAUDE_MCP_CALL = Call(f"mcp__probe__{mcp_probe.TOOL}", {"island": "Rottnest"})


def projected_workspace(mcp_url: str) -> dict[str, Any]:
    """The Workspace "app": instructions, an agent skill, and the MCP server at ``mcp_url``."""
    skills = [
        {"name": "quokka-census", "agent": {
            "description": f"Counts marsupials on islands ({SKILL_MARK}).",
            "instructions": "Count them one by one."}},
        {"name": "probe", "mcp": {"url": mcp_url}},
    ]  # fmt: skip
    instructions = f"Answer like a ship's log. ({INSTRUCTIONS_MARK})"
    return workspace("app", instructions=instructions, skills=skills)


def seen(requests: list[dict[str, Any]]) -> list[str]:
    """What the requests of one run carried, anywhere in their bodies."""
    bodies = json.dumps([r["body"] for r in requests])
    tools = json.dumps([r["body"].get("tools") for r in requests])
    return [
        what
        for what, found in (
            ("instructions", INSTRUCTIONS_MARK in bodies),
            ("skill", SKILL_MARK in bodies),
            ("mcp tool", mcp_probe.TOOL in tools),
        )
        if found
    ]


def unread(
    cluster: Cluster, namespace: str, sandboxes: list[str], model: ScriptedModel
) -> dict[str, list[str]]:
    """Run each CLI in each sandbox (one at a time); per run that did not read all three, or
    did not succeed, what it missed."""
    missed: dict[str, list[str]] = {}
    for box in sandboxes:
        for harness in HARNESSES:
            model.commands = [CLAUDE_MCP_CALL] if harness == "claude-code" else []
            before = len(model.requests)
            name = f"{box}-{harness}"
            fields = harness_fields(cluster, namespace, box, harness, model.url)
            cluster.apply(agent_run(name, box, harness, "Count them.", **fields), namespace)
            status = wait_for_run(cluster, namespace, name, timeout=240)
            read = seen(model.requests[before:])
            if status["phase"] != "Succeeded":
                read.append(f"ended {status['phase']}: {status.get('message')}")
            wanted = ["instructions", "skill", "mcp tool"]
            lacking = [what for what in wanted if what not in read] + read[3:]
            if lacking:
                missed[name] = lacking
    return missed
