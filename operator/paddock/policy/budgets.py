"""Budgets, decided: what a run has spent, which ceiling applies to it (the stricter of its own
and its policy's, figure by figure), whether a figure has reached or passed its ceiling, and
what a namespace has spent today under a policy. Pure: the gateway counts, the operator acts.

A ceiling is *reached* when a figure is at or past it: the gateway then refuses the run's next
request, and a namespace's new runs wait. It is *passed* when a figure is beyond it (the
request that crossed it had already started), or when the gateway refused a request because
one was reached: the run then ends BudgetExceeded."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from paddock.api.budget import Budget, DailyUsage

# (the budget's field, its name in the API, the figure of Spent it bounds)
FIGURES = (
    ("tokens", "tokens"),
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("cost_usd", "costUSD"),
    ("model_requests", "modelRequests"),
)
MAX_DAILY_ENTRIES = 4096


@dataclass(frozen=True)
class Spent:
    """What a run (or a namespace's day) used: tokens, US dollars of the priced responses,
    requests forwarded; ``unpriced``, responses of a model the price table does not price;
    ``refused``, requests the gateway refused because a ceiling was reached; ``uncounted``,
    answers whose usage could not be read whole (cut short by the client, or without usage
    fields)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model_requests: int = 0
    unpriced: int = 0
    refused: int = 0
    uncounted: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Spent) -> Spent:
        return Spent(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def __sub__(self, other: Spent) -> Spent:
        """What ``self`` has more than ``other``, figure by figure (never below nothing)."""
        return Spent(
            **{f.name: max(getattr(self, f.name) - getattr(other, f.name), 0) for f in fields(self)}
        )

    def at_least(self, other: Spent) -> Spent:
        """The larger of each figure: counts only grow."""
        return Spent(
            **{f.name: max(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)}
        )

    def describe(self) -> str:
        cost = f"${self.cost_usd:.4f}" + (" (and unpriced models)" if self.unpriced else "")
        return (
            f"{self.tokens} tokens ({self.input_tokens} in, {self.output_tokens} out), {cost}, "
            f"{self.model_requests} model requests"
        )


def effective(run: Budget | None, policy: Budget | None) -> Budget | None:
    """The ceilings a run is held to: for each figure, the stricter of its own and its
    policy's (where only one names it, that one); None when neither names any."""
    if run is None and policy is None:
        return None
    values = {}
    for name, _ in FIGURES:
        named = [
            v for v in (getattr(run, name, None), getattr(policy, name, None)) if v is not None
        ]
        values[name] = min(named) if named else None
    if all(v is None for v in values.values()):
        return None
    return Budget.model_validate(values)


UNCOUNTED = "an answer of the model was let through whose usage could not be read"


def _over(budget: Budget, spent: Spent, strictly: bool) -> str:
    if spent.uncounted and any(getattr(budget, name) is not None for name, _ in FIGURES[:4]):
        return UNCOUNTED  # (what it used is unknown: no token or cost ceiling can be said to hold)
    for name, api_name in FIGURES:
        ceiling = getattr(budget, name)
        if ceiling is None:
            continue
        figure = getattr(spent, name)
        if (figure > ceiling) if strictly else (figure >= ceiling):
            shown = (
                f"${figure:.4f} of ${ceiling:.4f}"
                if name == "cost_usd"
                else f"{figure} of {ceiling}"
            )
            return f"{api_name} {shown}"
        if name == "cost_usd" and spent.unpriced:
            return "costUSD: a model the gateway's price table does not price was asked for"
    return ""


def reached(budget: Budget | None, spent: Spent) -> str:
    """The first ceiling a figure is at or past ('tokens 240 of 200'), or ''."""
    return "" if budget is None else _over(budget, spent, strictly=False)


@dataclass(frozen=True)
class Admission:
    """Whether the gateway forwards a request now: ``refused``, the ceiling already reached;
    ``waits``, the requests in flight and this one could together pass a ceiling, so it waits
    for them to end and is decided again."""

    refused: str = ""
    waits: bool = False


ADMITTED = Admission()


def admission(budget: Budget | None, spent: Spent, flying: Spent, own: Spent) -> Admission:
    """A request, holding ``own`` (the most it can use), against the run's ceilings, what the
    run has spent, and what the requests in flight hold (``flying``, with their count as
    ``model_requests``). One request alone is let through until a ceiling is reached, so a run
    passes a ceiling by at most what one request used; requests in parallel only while all of
    them together fit."""
    at = reached(budget, spent)
    if at:
        return Admission(refused=at)
    if budget is None or not flying.model_requests:
        return ADMITTED
    total = spent + flying + own
    for name, _ in FIGURES[:4]:  # (the request count is counted at admission already)
        ceiling = getattr(budget, name)
        if ceiling is not None and getattr(total, name) > ceiling:
            return Admission(waits=True)
    return ADMITTED


def unpriced_refused(ceilings: tuple[Budget | None, ...], model: str, priced: bool) -> str:
    """Why a request for a model the price table does not price is refused: a cost ceiling
    applies to the run (its own, its policy's, its namespace's day), and an unknown cost
    cannot be held to it ('' when none applies, or the model is priced)."""
    if priced or all(c is None or c.cost_usd is None for c in ceilings):
        return ""
    return f"costUSD: the gateway's price table does not price model {model!r}"


def passed(budget: Budget | None, spent: Spent) -> str:
    """Why the run is past its budget: a figure beyond its ceiling, or a request refused at
    one ('' when neither)."""
    if budget is None:
        return ""
    beyond = _over(budget, spent, strictly=True)
    if beyond:
        return beyond
    return reached(budget, spent) if spent.refused else ""


def exceeded_message(budget: Budget, spent: Spent) -> str:
    return f"the run passed its budget ({passed(budget, spent)}): it used {spent.describe()}"


# -- a namespace's day -------------------------------------------------------------------------


def day_of(now: datetime) -> str:
    return now.strftime("%Y-%m-%d")


def spent_on(entries: list[DailyUsage], namespace: str, day: str) -> Spent:
    for entry in entries:
        if entry.namespace == namespace and entry.day == day:
            return Spent(
                input_tokens=entry.input_tokens,
                output_tokens=entry.output_tokens,
                cost_usd=entry.cost_usd,
                model_requests=entry.model_requests,
                unpriced=entry.unpriced_responses,
                uncounted=entry.uncounted_responses,
            )
    return Spent()


def counted(
    entries: list[DailyUsage], namespace: str, delta: Spent, now: datetime
) -> list[DailyUsage]:
    """The policy's day figures with ``delta`` added to the namespace's: today's entries only
    (a past day's are dropped)."""
    day = day_of(now)
    total = spent_on(entries, namespace, day) + delta
    kept = [e for e in entries if e.day == day and e.namespace != namespace]
    entry = DailyUsage(
        namespace=namespace,
        day=day,
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        cost_usd=round(total.cost_usd, 6),
        model_requests=total.model_requests,
        unpriced_responses=total.unpriced,
        uncounted_responses=total.uncounted,
        updated_at=now,
    )
    return sorted([*kept, entry], key=lambda e: e.namespace)[-MAX_DAILY_ENTRIES:]


def exhausted(daily: Budget | None, spent: Spent, namespace: str, policy: str) -> str:
    """Why a namespace's new runs under ``policy`` wait today ('' when they need not)."""
    at = reached(daily, spent)  # (what could not be priced or counted is no zero)
    if not at:
        return ""
    return (
        f"namespace {namespace} has used its daily budget under SandboxPolicy {policy} "
        f"({at}; today: {spent.describe()}); the run starts when the UTC day ends or the "
        "budget is raised"
    )
