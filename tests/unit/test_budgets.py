"""Budgets, decided: the ceilings a run is held to, when a figure has reached or passed one,
and a namespace's day under a policy. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from paddock.api.budget import Budget, DailyUsage, PolicyBudget
from paddock.policy import budgets
from paddock.policy.budgets import Spent

NOW = datetime(2026, 12, 4, 15, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("run", "policy", "expected"),
    [
        (None, None, None),
        (Budget(tokens=500), None, Budget(tokens=500)),
        (None, Budget(cost_usd=2.0), Budget(cost_usd=2.0)),
        (Budget(tokens=500), Budget(tokens=300), Budget(tokens=300)),
        (Budget(tokens=200), Budget(tokens=300), Budget(tokens=200)),
        (
            Budget(tokens=200, model_requests=9),
            Budget(cost_usd=1.5, model_requests=4),
            Budget(tokens=200, cost_usd=1.5, model_requests=4),
        ),
        (None, PolicyBudget(per_namespace_daily=Budget(tokens=9)), None),  # a day's only
    ],
)
def test_a_run_is_held_to_the_stricter_ceiling_of_each_figure(
    run: Budget | None, policy: Budget | None, expected: Budget | None
) -> None:
    assert budgets.effective(run, policy) == expected


@pytest.mark.parametrize(
    ("budget", "spent", "reached", "passed"),
    [
        (Budget(tokens=240), Spent(input_tokens=100, output_tokens=20), "", ""),
        (
            Budget(tokens=240),
            Spent(input_tokens=200, output_tokens=40),
            "tokens 240 of 240",
            "",
        ),
        (
            Budget(tokens=240),
            Spent(input_tokens=200, output_tokens=40, refused=1),
            "tokens 240 of 240",
            "tokens 240 of 240",
        ),
        (
            Budget(tokens=150),
            Spent(input_tokens=200, output_tokens=40),
            "tokens 240 of 150",
            "tokens 240 of 150",
        ),
        (Budget(input_tokens=150), Spent(input_tokens=149), "", ""),
        (
            Budget(output_tokens=10),
            Spent(output_tokens=11),
            "outputTokens 11 of 10",
            "outputTokens 11 of 10",
        ),
        (Budget(model_requests=2), Spent(model_requests=2), "modelRequests 2 of 2", ""),
        (
            Budget(cost_usd=0.5),
            Spent(cost_usd=0.75),
            "costUSD $0.7500 of $0.5000",
            "costUSD $0.7500 of $0.5000",
        ),
        (
            Budget(cost_usd=0.5),
            Spent(cost_usd=0.01, unpriced=1),
            "costUSD: a model the gateway's price table does not price was asked for",
            "costUSD: a model the gateway's price table does not price was asked for",
        ),
        (Budget(tokens=100), Spent(unpriced=3), "", ""),  # no cost ceiling: pricing is moot
        (
            Budget(tokens=10**6),
            Spent(input_tokens=100, uncounted=1),
            budgets.UNCOUNTED,
            budgets.UNCOUNTED,
        ),
        (Budget(model_requests=5), Spent(model_requests=1, uncounted=1), "", ""),
    ],
)
def test_a_ceiling_is_reached_at_it_and_passed_beyond_it_or_at_a_refusal(
    budget: Budget, spent: Spent, reached: str, passed: str
) -> None:
    assert budgets.reached(budget, spent) == reached
    assert budgets.passed(budget, spent) == passed


def test_no_budget_is_never_reached() -> None:
    huge = Spent(input_tokens=10**9, refused=5)
    assert budgets.reached(None, huge) == budgets.passed(None, huge) == ""


def test_spent_adds_subtracts_and_only_grows_figure_by_figure() -> None:
    a = Spent(input_tokens=100, output_tokens=20, cost_usd=0.5, model_requests=1)
    b = Spent(input_tokens=50, output_tokens=30, cost_usd=0.25, refused=2)
    assert a + b == Spent(150, 50, 0.75, 1, 0, 2)
    assert (a + b) - a == b
    assert a - b == Spent(50, 0, 0.25, 1, 0, 0)
    assert a.at_least(b) == Spent(100, 30, 0.5, 1, 0, 2)
    assert (a + b).tokens == 200
    said = budgets.exceeded_message(Budget(tokens=100), a)
    assert said == (
        "the run passed its budget (tokens 120 of 100): it used 120 tokens (100 in, 20 out), "
        "$0.5000, 1 model requests"
    )


def test_a_namespaces_day_is_added_to_and_a_past_day_is_dropped() -> None:
    yesterday = DailyUsage(namespace="team", day="2026-12-03", input_tokens=999)
    other = DailyUsage(namespace="other", day="2026-12-04", output_tokens=7)
    entries = budgets.counted([yesterday, other], "team", Spent(100, 20, 0.1, 1), NOW)
    assert [(e.namespace, e.day) for e in entries] == [
        ("other", "2026-12-04"),
        ("team", "2026-12-04"),
    ]
    assert budgets.spent_on(entries, "team", "2026-12-04") == Spent(100, 20, 0.1, 1)
    again = budgets.counted(entries, "team", Spent(100, 20, 0.1, 1), NOW)
    assert budgets.spent_on(again, "team", "2026-12-04") == Spent(200, 40, 0.2, 2)
    assert budgets.spent_on(again, "other", "2026-12-04") == Spent(output_tokens=7)
    assert budgets.spent_on(again, "team", "2026-12-05") == Spent()


def test_a_namespace_whose_day_reached_a_ceiling_waits_and_says_until_when() -> None:
    daily = Budget(tokens=1000)
    assert budgets.exhausted(daily, Spent(input_tokens=900, output_tokens=99), "team", "p") == ""
    said = budgets.exhausted(daily, Spent(input_tokens=900, output_tokens=100), "team", "p")
    assert said.startswith("namespace team has used its daily budget under SandboxPolicy p")
    assert "tokens 1000 of 1000" in said
    assert said.endswith("the run starts when the UTC day ends or the budget is raised")
    assert budgets.exhausted(None, Spent(input_tokens=10**9), "team", "p") == ""


def test_a_day_keeps_what_it_could_not_price_or_count_and_is_spent_by_it() -> None:
    entries = budgets.counted([], "team", Spent(100, 20, 0.0, 1, unpriced=1, uncounted=1), NOW)
    today = budgets.spent_on(entries, "team", "2026-12-04")
    assert (today.unpriced, today.uncounted) == (1, 1)
    priced_only = Spent(100, 20, 0.0, 1, unpriced=1)
    assert "does not price" in budgets.exhausted(Budget(costUSD=5), priced_only, "team", "p")
    assert budgets.exhausted(Budget(tokens=10**6), priced_only, "team", "p") == ""
    unread = Spent(100, 20, 0.0, 1, uncounted=1)
    assert "could not be read" in budgets.exhausted(Budget(tokens=10**6), unread, "team", "p")
    assert budgets.exhausted(Budget(modelRequests=5), unread, "team", "p") == ""
