"""How every follower follows (``kube.follow``), its logic driven by listings and watches
scripted in the test (the real API server's watches, expiry and bookmarks are
tests/integration/test_watches.py's): a listing, then each change; a listing again when the
version expired; a pause, doubling, while the API server is away, for as long as the
follower's patience; a refusal at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from paddock.kube.errors import ForbiddenError, KubeError, NoClusterConfigError
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
    refused = ConnectionRefusedError("refused")
    script = Script(
        [([], "5"), away, refused, ([], "8")], [KubeError(500, "InternalError", "x"), []]
    )
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


def test_the_follower_is_asked_again_after_every_end_of_a_watch_however_it_ended() -> None:
    """A person's access is checked after an expired version and while the server is away,
    not only after a watch the server ended: a live page never goes on unchecked."""
    away = KubeError(503, "ServiceUnavailable", "x")
    script = Script([([], "5"), ([], "7"), ([], "9")],
                    [WatchExpiredError("too old"), away, [("ADDED", _obj("a", "10"))]])  # fmt: skip
    renewals: list[int] = []

    def renewed() -> bool:
        renewals.append(len(script.asked))
        return True

    assert _follow(script, 4, renewed=renewed)[-1] == Changed("ADDED", _obj("a", "10"))
    assert len(renewals) == 2  # after the expiry and after the pause


def test_a_listing_alone_does_not_reset_the_patience() -> None:
    """A server that lists but whose watches keep failing is given up after the patience."""
    away = KubeError(503, "ServiceUnavailable", "watches fail")
    script = Script([([], str(n)) for n in range(50)], [away] * 50)
    with pytest.raises(KubeError, match="watches fail"):
        _follow(script, 1000, patience=20.0)
    assert sum(script.slept) >= 20.0


def test_a_version_that_expires_again_at_once_is_waited_on() -> None:
    script = Script([([], str(n)) for n in range(4)], [WatchExpiredError("too old")] * 4)
    _follow(script, 4)
    assert script.slept == [1.0, 2.0]  # not a tight loop of listings


def test_no_configuration_is_not_a_server_away() -> None:
    script = Script([NoClusterConfigError("no kubeconfig")], [])
    with pytest.raises(NoClusterConfigError):
        _follow(script, 1)
    assert script.slept == []
