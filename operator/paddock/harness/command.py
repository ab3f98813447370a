"""harness: command — a shell command; each line it prints is an output event."""

from __future__ import annotations

from paddock.api.agentrun import AgentRunSpec
from paddock.harness.base import NO_WORKSPACE, Harness, Invocation, WorkspaceContext
from paddock.runs.events import OUTPUT, Draft


def invocation(spec: AgentRunSpec, workspace: WorkspaceContext = NO_WORKSPACE) -> Invocation:
    """The command as written; the Workspace's projections are in the workspace's files."""
    return Invocation(script=spec.command or "")


def parse_line(line: str) -> list[Draft]:
    return [Draft(OUTPUT, line, {"stream": "stdout", "text": line})]


HARNESS = Harness("command", invocation, parse_line)
