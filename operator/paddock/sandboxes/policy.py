"""Deciding a SandboxPolicy's status: a Valid condition that names every rule that cannot
work as written. Pure; the service writes it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from paddock.api.common import stored_status
from paddock.api.conditions import Notice, get_condition, set_condition
from paddock.api.errors import describe
from paddock.api.policy import SandboxPolicySpec, SandboxPolicyStatus
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import PolicyReason as R
from paddock.policy.check import problems, warnings
from paddock.sandboxes.plan import Plan

Obj = dict[str, Any]
VALID_MESSAGE = "Every rule and CIDR of the policy can apply."


def decide_policy(body: Obj, now: datetime) -> Plan:
    generation = body["metadata"].get("generation")
    old = stored_status(SandboxPolicyStatus, body)
    status = SandboxPolicyStatus(observed_generation=generation, conditions=old.conditions)
    try:
        spec = SandboxPolicySpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        valid, reason, message = (
            False,
            R.INVALID_SPEC,
            "The spec is invalid: " + "; ".join(describe(exc)),
        )
    else:
        found, risky = problems(spec), warnings(spec)
        if found:
            valid, reason = False, R.RULES_INEFFECTIVE
            message = "Rules that cannot work as written: " + "; ".join(found) + "."
        elif risky:
            valid, reason = True, R.RUNS_WRITABLE_FILES
            message = "Every rule can apply, but: " + "; ".join(risky) + "."
        else:
            valid, reason, message = True, R.VALID, VALID_MESSAGE
    previous = get_condition(old.conditions, C.VALID)
    status.conditions = set_condition(
        status.conditions, C.VALID, valid, reason, message, generation=generation, now=now
    )
    said_before = previous is not None and (previous.reason, previous.message) == (
        reason,
        message,
    )
    return Plan(status, notices=[] if said_before else [Notice(reason, message)])
