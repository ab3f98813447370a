"""The Paddock API: pydantic models of its kinds, the single source of their schemas."""

from paddock.api.agentrun import AgentRun, AgentRunSpec, AgentRunStatus
from paddock.api.policy import SandboxPolicy, SandboxPolicySpec, SandboxPolicyStatus
from paddock.api.pool import SandboxPool, SandboxPoolSpec, SandboxPoolStatus
from paddock.api.sandbox import Sandbox, SandboxSpec, SandboxStatus
from paddock.api.workspace import Workspace, WorkspaceSpec, WorkspaceStatus

KINDS = (Workspace, SandboxPolicy, Sandbox, SandboxPool, AgentRun)

__all__ = [
    "KINDS",
    "AgentRun",
    "AgentRunSpec",
    "AgentRunStatus",
    "Sandbox",
    "SandboxPolicy",
    "SandboxPolicySpec",
    "SandboxPolicyStatus",
    "SandboxPool",
    "SandboxPoolSpec",
    "SandboxPoolStatus",
    "SandboxSpec",
    "SandboxStatus",
    "Workspace",
    "WorkspaceSpec",
    "WorkspaceStatus",
]
