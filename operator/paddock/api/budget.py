"""Budgets: what a run may spend on its model, counted where the model is reached (the egress
gateway's model route), and what a namespace may spend a day under one SandboxPolicy."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import ConfigDict, Field, model_validator

from paddock.api.common import ApiModel, cel, validations

EMPTY_MESSAGE = (
    "a budget names at least one of tokens, inputTokens, outputTokens, costUSD, modelRequests"
)
CEILINGS = ("tokens", "input_tokens", "output_tokens", "cost_usd", "model_requests")
_ANY = " || ".join(
    f"has(self.{name})"
    for name in ("tokens", "inputTokens", "outputTokens", "costUSD", "modelRequests")
)


class Budget(ApiModel):
    """Ceilings on a run's model use, each optional. A request that would start with a figure
    at its ceiling is refused by the gateway (the harness sees a "budget exhausted" error from
    its model API), and a run whose figures pass a ceiling, or that was refused so, ends
    Failed (BudgetExceeded). A response already streaming when a ceiling is passed finishes."""

    model_config = ConfigDict(json_schema_extra=validations(cel(_ANY, EMPTY_MESSAGE)))

    tokens: int | None = Field(default=None, ge=1, description="Input and output tokens together.")
    input_tokens: int | None = Field(
        default=None, ge=1, description="Input tokens (prompt-cache reads and writes included)."
    )
    output_tokens: int | None = Field(
        default=None, ge=1, description="Output tokens (reasoning tokens included)."
    )
    cost_usd: float | None = Field(
        default=None,
        ge=0,
        alias="costUSD",
        description="US dollars, from the gateway's price table. A model the table does not "
        "price has no known cost: a request for one is refused, and the run is past its budget.",
    )
    model_requests: int | None = Field(
        default=None, ge=1, description="Requests forwarded to the model API."
    )

    @model_validator(mode="after")
    def _names_a_ceiling(self) -> Budget:
        if type(self) is Budget and all(getattr(self, n) is None for n in CEILINGS):
            raise ValueError(EMPTY_MESSAGE)
        return self


class PolicyBudget(Budget):
    """A policy's budget: ceilings for each run under it (a run's own budget can only be
    stricter), and a day's ceilings for all its runs in one namespace."""

    model_config = ConfigDict(json_schema_extra={})

    per_namespace_daily: Budget | None = Field(
        default=None,
        description="What all runs under this policy in one namespace may spend in a UTC "
        "calendar day together. Once a day's figures reach it, new runs wait Pending "
        "(BudgetExhausted) until the day ends or the budget is raised; runs already running "
        "go on, each within its own budget. Only a SandboxPolicy object (or the operator's "
        "default policy) keeps a day's figures, in its status: not an inline policy.",
    )


class DailyUsage(ApiModel):
    """What runs under the policy in one namespace spent on one UTC day."""

    namespace: str = Field(description="The runs' namespace.")
    day: str = Field(description="The UTC day, YYYY-MM-DD.")
    input_tokens: int = Field(default=0, description="Input tokens.")
    output_tokens: int = Field(default=0, description="Output tokens.")
    cost_usd: float = Field(default=0.0, alias="costUSD", description="US dollars (priced models).")
    model_requests: int = Field(default=0, description="Model requests.")
    unpriced_responses: int = Field(
        default=0, description="Answers of a model the gateway's price table does not price."
    )
    uncounted_responses: int = Field(
        default=0, description="Answers whose usage could not be read whole."
    )
    updated_at: datetime | None = Field(default=None, description="When last counted.")


class UsageSource(StrEnum):
    GATEWAY = "gateway"  # counted at the egress gateway's model route
    HARNESS = "harness"  # as the harness reported it


class Usage(ApiModel):
    """Tokens and cost: counted at the egress gateway's model route where the run's model is
    reached there (source gateway), else as the harness reports them (source harness)."""

    input_tokens: int | None = Field(default=None, description="Input tokens.")
    output_tokens: int | None = Field(default=None, description="Output tokens.")
    tokens: int | None = Field(default=None, description="Input and output tokens together.")
    cost_usd: float | None = Field(
        default=None,
        description="Cost in US dollars (source gateway: of the models its price table prices).",
    )
    model_requests: int | None = Field(
        default=None, description="Requests forwarded to the model API (source gateway)."
    )
    unpriced_responses: int | None = Field(
        default=None,
        description="Answers of a model the gateway's price table does not price: their cost is "
        "not in costUsd (source gateway; absent when none).",
    )
    uncounted_responses: int | None = Field(
        default=None,
        description="Answers whose usage could not be read whole, such as one its client left "
        "before its end: their tokens are not all counted (source gateway; absent when none).",
    )
    source: UsageSource | None = Field(default=None, description="gateway or harness.")
