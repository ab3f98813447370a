"""A run's mark of activity on its sandbox (``paddock.dev/last-activity``): it keeps the
sandbox from idling out while the run runs, and resumes it when it was paused idle."""

from __future__ import annotations

from datetime import datetime, timedelta

from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.times import format_time, parse_time
from paddock.vocab.names import ACTIVITY_ANNOTATION

EVERY = timedelta(seconds=30)  # how often a running run marks its sandbox


def touch(namespace: str, sandbox: str, now: datetime) -> None:
    """Mark the sandbox active now."""
    annotations = {ACTIVITY_ANNOTATION: format_time(now)}
    kube.patch("Sandbox", namespace, sandbox, {"metadata": {"annotations": annotations}})


def keep_active(namespace: str, sandbox: str, now: datetime, last: datetime | None) -> datetime:
    """Mark the sandbox active if ``last`` (or, not known, the mark it has: a take's) is
    ``EVERY`` old or more; when it stands marked."""
    if last is None:
        found = CACHE.get("Sandbox", namespace, sandbox) or {}
        annotations = (found.get("metadata") or {}).get("annotations") or {}
        last = parse_time(annotations.get(ACTIVITY_ANNOTATION))
    if last is not None and now - EVERY < last <= now:
        return last
    touch(namespace, sandbox, now)
    return now
