"""The handlers post an Event once per change, and forget the objects seen least recently."""

from __future__ import annotations

from paddock.handlers.reporting import LastPosted


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
