"""The Paddock API: pydantic models of the four kinds, the single source of their schemas."""

from paddock.api.agentrun import AgentRun, AgentRunSpec, AgentRunStatus
from paddock.api.policy import SandboxPolicy, SandboxPolicySpec, SandboxPolicyStatus
from paddock.api.sandbox import Sandbox, SandboxSpec, SandboxStatus
from paddock.api.workspace import Workspace, WorkspaceSpec, WorkspaceStatus

KINDS = (Workspace, SandboxPolicy, Sandbox, AgentRun)

__all__ = [
    "KINDS",
    "AgentRun",
    "AgentRunSpec",
    "AgentRunStatus",
    "Sandbox",
    "SandboxPolicy",
    "SandboxPolicySpec",
    "SandboxPolicyStatus",
    "SandboxSpec",
    "SandboxStatus",
    "Workspace",
    "WorkspaceSpec",
    "WorkspaceStatus",
]
