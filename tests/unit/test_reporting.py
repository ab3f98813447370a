"""The handlers post an Event once per change, and forget the objects seen least recently; a
reconcile that raises is a Warning Event."""

from __future__ import annotations

from typing import Any

import pytest

from paddock.handlers import sandbox
from paddock.handlers.reporting import LastPosted
from paddock.kube.errors import ForbiddenError
from paddock.sandboxes.writes import Outcome
from paddock.settings import OperatorSettings


def test_the_same_event_twice_is_posted_once() -> None:
    posted = LastPosted()
    assert posted.changed("a", ("Starting", "Waiting."))
    assert not posted.changed("a", ("Starting", "Waiting."))
    assert posted.changed("a", ("Ready", "Ready."))
    assert posted.changed("a", ("Starting", "Waiting."))  # a real change back is news
    assert posted.changed("b", ("Starting", "Waiting."))


def test_it_holds_at_most_its_capacity_dropping_the_oldest() -> None:
    posted = LastPosted(capacity=2)
    posted.changed("a", ("R", "m"))
    posted.changed("b", ("R", "m"))
    assert not posted.changed("a", ("R", "m"))  # a is now the most recent
    posted.changed("c", ("R", "m"))  # b goes
    assert posted.changed("b", ("R", "m"))
    assert not posted.changed("c", ("R", "m"))


def test_a_reconcile_that_raises_is_a_warning_event_and_raises_for_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = {"apiVersion": "paddock.dev/v1alpha1", "kind": "Sandbox",
            "metadata": {"name": "s", "namespace": "t", "uid": "u1"}}  # fmt: skip
    reported: list[tuple[dict[str, Any], Outcome]] = []

    def refused(*_: Any) -> None:
        raise ForbiddenError(403, "Forbidden", 'secrets "token" is forbidden')

    monkeypatch.setattr(sandbox.service, "reconcile_sandbox_named", refused)
    monkeypatch.setattr(sandbox.service, "known_sandbox", lambda *_: body)
    monkeypatch.setattr(sandbox, "report", lambda b, o, **_: reported.append((b, o)))
    with pytest.raises(ForbiddenError):
        sandbox.reconcile_named("t", "s", OperatorSettings())
    ((posted_on, outcome),) = reported
    assert posted_on is body
    (notice,) = outcome.notices
    assert (notice.reason, notice.type) == ("ReconcileFailed", "Warning")
    assert 'secrets "token" is forbidden' in notice.message
