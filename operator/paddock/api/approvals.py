"""Approvals: a request the policy says to ask a person about, and what became of it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from paddock.api.common import ApiModel

# A person's decision on an approval request: the annotation approval.paddock.dev/<id> on
# the run, one of ApprovalChoice's values.
APPROVAL_ANNOTATION = "approval.paddock.dev/"
# Who decided a request, beside the decision (written by the console and the MCP server over
# HTTP, which know the caller's identity; the operator never reads it).
DECIDED_BY_ANNOTATION = "decided-by.approval.paddock.dev/"


class ApprovalChoice(StrEnum):
    APPROVE = "approve"
    ALWAYS = "approve-always"  # also every later request of the same rules in the run
    DENY = "deny"


class ApprovalState(StrEnum):
    PENDING = "Pending"
    APPROVED = "Approved"
    DENIED = "Denied"
    EXPIRED = "Expired"


class Approval(ApiModel):
    """A request the policy says to ask a person about, and what became of it."""

    id: str = Field(description="The request's id: name it to paddock approve or deny.")
    kind: str = Field(
        description="What is asked for: command, file-write (a file the agent would write) or "
        "network (a host it would reach)."
    )
    target: str = Field(description="The command, file or host, abridged.")
    rules: list[str] = Field(default_factory=list, description="The policy rules that said to ask.")
    state: ApprovalState = Field(description="Pending, Approved, Denied or Expired.")
    always: bool = Field(
        default=False,
        description="Approved for the rest of the run: later requests that only these rules "
        "ask about are allowed.",
    )
    requested_at: datetime = Field(description="When the agent asked.")
    resolved_at: datetime | None = Field(default=None, description="When it was decided.")
    message: str | None = Field(default=None, description="How it was decided.")
