"""From journal bytes to events: the harness's stdout (one event source line a line, parsed by
its harness module) and the wrapper's file journal (``<change>\\t<path>`` lines). Pure.

A poll brings the bytes after the cursor. Only whole lines are taken, so the cursor always
stands at a line boundary; a batch stops at ``BATCH_BYTES`` of events, leaving the rest for the
next poll, so one log write stays well under the ConfigMap limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from paddock.runs import events as ev
from paddock.runs.events import Draft

POLL_BYTES = 256 * 1024  # journal bytes read per poll
BATCH_BYTES = 256 * 1024  # encoded events written per log write, at most
EVENT_OVERHEAD = 100  # seq, time, type and summary around an event's data, roughly

Parser = Callable[[str], list[Draft]]


@dataclass(frozen=True)
class Consumed:
    drafts: list[Draft]
    cursor: dict[str, int]
    more: bool  # more is waiting: poll again at once


def consume(
    parse: Parser,
    journals: Mapping[str, bytes],
    cursor: Mapping[str, int],
    session_id: str | None,
    *,
    final: bool,
    keep: int = 0,
) -> Consumed:
    """Events from each journal's new bytes (``stdout``, ``files``), the cursor after them, and
    whether more is waiting. A partial last line waits for its end unless the harness has
    ended (``final``) or the line alone fills a poll: then it is taken, cut, leaving its last
    ``keep`` bytes for the next poll so that a secret value straddling the cut is read whole
    there. A session id the log already has is not a new event."""
    after = dict(cursor)
    drafts: list[Draft] = []
    budget = BATCH_BYTES
    more = False
    session = session_id
    for name, data in journals.items():
        pos = 0
        while pos < len(data) and budget > 0:
            end = data.find(b"\n", pos)
            after_line = end + 1  # past the newline
            if end == -1:
                if final:
                    end = after_line = len(data)
                elif pos == 0 and len(data) >= POLL_BYTES:
                    end = after_line = len(data) - min(keep, len(data) // 2)
                else:
                    break
            line = data[pos:end].decode(errors="replace")
            pos = after_line
            for draft in _line_drafts(name, line, parse):
                if draft.type == ev.SESSION_ID:
                    if draft.data.get("sessionId") in (None, session):
                        continue
                    session = draft.data.get("sessionId")
                drafts.append(draft)
                budget -= len(ev.encode(draft.data)) + EVENT_OVERHEAD
        after[name] = after.get(name, 0) + pos
        more = more or budget <= 0 or len(data) >= POLL_BYTES
    return Consumed(drafts, after, more)


def _line_drafts(journal: str, line: str, parse: Parser) -> list[Draft]:
    if journal == "files":
        change, _, path = line.partition("\t")
        if not path:
            return []
        return [Draft(ev.SANDBOX_FILE, f"{change} {path}", {"change": change, "path": path})]
    if not line.strip():
        return []
    try:
        return parse(line)
    except Exception as exc:  # a parser bug must not stop the run's log
        return [
            Draft(
                ev.ERROR,
                f"could not parse a harness line: {exc}",
                {"reason": "ParserError", "line": line},
            )
        ]
