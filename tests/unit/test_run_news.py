"""When a running run's daemon steps on news (``handlers.agentrun.News``): anything urgent at
once; journal lines alone at once after a quiet spell, else a second after the last write."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from paddock.handlers.agentrun import WRITE_GAP_SECONDS, News


class Stopped:
    """A daemon that is not stopping (kopf's flag, as the daemon uses it)."""

    def __bool__(self) -> bool:
        return False

    def wait(self, timeout: float) -> Any:
        return asyncio.sleep(timeout)


async def _waited(urgent: bool, appended_ago: float) -> float:
    news = News(asyncio.get_running_loop())
    start = time.monotonic()
    news.wake(urgent)
    await news.wait(Stopped(), 10.0, start - appended_ago)  # type: ignore[arg-type]
    return time.monotonic() - start


def test_urgent_news_steps_at_once_even_right_after_a_write() -> None:
    assert asyncio.run(_waited(urgent=True, appended_ago=0.0)) < WRITE_GAP_SECONDS / 2


def test_a_line_after_a_quiet_spell_steps_at_once() -> None:
    assert asyncio.run(_waited(urgent=False, appended_ago=5.0)) < WRITE_GAP_SECONDS / 2


def test_lines_right_after_a_write_wait_for_the_gap() -> None:
    waited = asyncio.run(_waited(urgent=False, appended_ago=0.0))
    assert WRITE_GAP_SECONDS * 0.9 <= waited < 10.0


def test_urgent_news_cuts_the_gap_short() -> None:
    async def scenario() -> float:
        news = News(asyncio.get_running_loop())
        start = time.monotonic()
        news.wake(False)
        asyncio.get_running_loop().call_later(0.1, news.wake, True)
        await news.wait(Stopped(), 10.0, start)  # type: ignore[arg-type]
        return time.monotonic() - start

    assert asyncio.run(scenario()) < WRITE_GAP_SECONDS / 2
