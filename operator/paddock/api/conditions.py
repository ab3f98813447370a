"""metav1.Condition lists, typed: set one (keeping its transition time while its status holds),
read one; and the Kubernetes Events that report a change."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from paddock.api.common import Condition, ConditionStatus
from paddock.api.reasons import ConditionType, Reason, Severity


def set_condition(
    conditions: list[Condition],
    type_: ConditionType,
    status: bool | None,
    reason: Reason | str,
    message: str,
    *,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """A new list with ``type_`` set (True/False/Unknown from True/False/None), for the
    generation it describes; in the place it had, so that an unchanged list compares equal."""
    text = ConditionStatus.UNKNOWN if status is None else ConditionStatus(str(status))
    previous = get_condition(conditions, type_)
    unchanged = previous is not None and previous.status == text
    condition = Condition(
        type=type_,
        status=text,
        reason=reason,
        message=message,
        last_transition_time=(previous.last_transition_time if unchanged and previous else now),
        observed_generation=generation,
    )
    if previous is None:
        return [*conditions, condition]
    return [condition if c.type == type_ else c for c in conditions]


def get_condition(conditions: list[Condition], type_: ConditionType) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: list[Condition], type_: ConditionType) -> bool:
    condition = get_condition(conditions, type_)
    return condition is not None and condition.status == ConditionStatus.TRUE


@dataclass(frozen=True)
class Notice:
    """A Kubernetes Event to post on the object: its type comes from the reason."""

    reason: Reason
    message: str

    @property
    def type(self) -> Severity:
        return self.reason.severity
