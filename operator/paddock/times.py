"""Times as the Kubernetes API writes them: UTC, RFC 3339, whole seconds."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, in UTC, to the second (what a metav1.Time can hold)."""
    return datetime.now(UTC).replace(microsecond=0)


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time (``2026-01-02T03:04:05Z``) as an aware datetime; None for None or ""."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def format_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
