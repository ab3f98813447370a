"""How every follower follows (``kube.follow``), its logic driven by listings and watches
scripted in the test (the real API server's watches, expiry and bookmarks are
tests/integration/test_watches.py's): a listing, then each change; a listing again when the
version expired; a pause, doubling, while the API server is away, for as long as the
follower's patience; a refusal at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from paddock.kube.errors import ForbiddenError, KubeError
from paddock.kube.follow import Changed, Listed, follow
from paddock.kube.watches import WatchExpiredError

Obj = dict[str, Any]


def _obj(name: str, version: str) -> Obj:
    return {"metadata": {"name": name, "resourceVersion": version}}


class Script:
    """Listings and watches that go as the test says; what was asked, in order."""

    def __init__(self, listings: list[Any], watches: list[Any]) -> None:
        self.listings, self.watches = listings, watches
        self.asked: list[str] = []
        self.slept: list[float] = []
        self.now = 0.0

    def listing(self) -> tuple[list[Obj], str]:
        self.asked.append("list")
        answer = self.listings.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    def watching(self, version: str) -> Iterator[tuple[str, Obj]]:
        self.asked.append(f"watch@{version}")
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        yield from answer

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _follow(script: Script, count: int, **options: Any) -> list[Any]:
    seen = []
    for item in follow(script.listing, script.watching, sleep=script.sleep,
                       clock=lambda: script.now, **options):  # fmt: skip
        seen.append(item)
        if len(seen) == count:
            break
    return seen


def test_a_listing_then_each_change_a_bookmark_moving_the_version_on() -> None:
    changes = [("ADDED", _obj("b", "6")), ("BOOKMARK", _obj("", "9")), ("DELETED", _obj("a", "10"))]
    script = Script([([_obj("a", "4")], "5")], [changes, [("MODIFIED", _obj("b", "11"))]])
    seen = _follow(script, 4)
    assert seen == [
        Listed([_obj("a", "4")]),
        Changed("ADDED", _obj("b", "6")),
        Changed("DELETED", _obj("a", "10")),
        Changed("MODIFIED", _obj("b", "11")),
    ]
    assert script.asked == ["list", "watch@5", "watch@10"]  # renewed from the last version


def test_an_expired_version_is_listed_again() -> None:
    script = Script([([], "5"), ([_obj("a", "20")], "21")], [WatchExpiredError("too old"), []])
    assert _follow(script, 2) == [Listed([]), Listed([_obj("a", "20")])]
    assert script.asked == ["list", "watch@5", "list"]


def test_an_api_server_away_is_waited_for_with_pauses_that_double_then_given_up() -> None:
    away = KubeError(503, "ServiceUnavailable", "etcd is restarting")
    script = Script([([], "5"), away, OSError("refused"), ([], "8"), away, away, away],
                    [KubeError(500, "InternalError", "x"), []])  # fmt: skip
    seen = _follow(script, 2)
    assert seen == [Listed([]), Listed([])]  # listed again once it was back
    assert script.slept == [1.0, 2.0, 4.0]
    with pytest.raises(KubeError, match="etcd is restarting"):
        _follow(Script([away] * 10, []), 1, patience=5.0)


def test_a_refusal_ends_the_following_at_once() -> None:
    script = Script([([], "5")], [ForbiddenError(403, "Forbidden", "no longer yours")])
    with pytest.raises(ForbiddenError):
        _follow(script, 5)
    assert script.slept == []


def test_the_follower_says_when_to_stop_each_time_a_watch_ends() -> None:
    script = Script([([], "5")], [[("ADDED", _obj("a", "6"))], []])
    renewals = []

    def renewed() -> bool:
        renewals.append(len(script.asked))
        return len(renewals) < 2

    assert _follow(script, 10, renewed=renewed) == [Listed([]), Changed("ADDED", _obj("a", "6"))]
    assert script.asked == ["list", "watch@5", "watch@6"]
