"""Counting requests in the local API server's audit log (every request a ServiceAccount
makes, as JSON lines; see ``cluster.audit_log``): how benchmarks and tests measure what a
component asks of the API server."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True)
class Request:
    verb: str
    resource: str  # resource[/subresource]
    name: str  # the object's ("" for a list, or a create by generateName)
    received: float  # epoch seconds
    namespace: str = ""  # the object's ("" for a cluster-scoped one or a list of all)
    code: int = 0  # the response's status code (0: not answered yet)


def requests(log: Path, username: str, since: float, until: float) -> Counter[tuple[str, str]]:
    """(verb, resource[/subresource]) of ``username``'s requests received in [since, until)
    (epoch seconds). The API server writes its audit log asynchronously: wait for the
    requests to be there before counting them."""
    return Counter((r.verb, r.resource) for r in each_request(log, username, since, until))


def each_request(log: Path, username: str, since: float, until: float) -> Iterator[Request]:
    """``username``'s requests received in [since, until), one by one."""
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
                code = int((entry.get("responseStatus") or {}).get("code") or 0)
                yield Request(
                    entry["verb"], resource, ref.get("name", ""), stamp, ref.get("namespace", ""),
                    code,
                )  # fmt: skip


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
