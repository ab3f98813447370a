"""Counting requests in the local API server's audit log (every request a ServiceAccount
makes, as JSON lines; see ``cluster.audit_log``): how benchmarks and tests measure what a
component asks of the API server."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path


def requests(log: Path, username: str, since: float, until: float) -> Counter[tuple[str, str]]:
    """(verb, resource[/subresource]) of ``username``'s requests received in [since, until)
    (epoch seconds). The API server writes its audit log asynchronously: wait for the
    requests to be there before counting them."""
    counted: Counter[tuple[str, str]] = Counter()
    for path in (log.with_name(log.name + ".1"), log):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("user", {}).get("username") != username or "objectRef" not in entry:
                continue
            stamp = _epoch(entry["requestReceivedTimestamp"])
            if since <= stamp < until:
                ref = entry["objectRef"]
                resource = ref.get("resource", "") + (
                    "/" + ref["subresource"] if ref.get("subresource") else ""
                )
                counted[(entry["verb"], resource)] += 1
    return counted


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
