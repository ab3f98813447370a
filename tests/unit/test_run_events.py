"""Run events: stamping, scrubbing, bounding, the summary a log folds into, chunk reading, and
how journal bytes become events (whole lines only, a cursor that moves with them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from paddock.api.agentrun import Harness
from paddock.harness import HARNESSES
from paddock.runs import events as ev
from paddock.runs import journal
from paddock.runs.events import Draft, RunSummary, stamp
from paddock.runs.journal import POLL_BYTES
from paddock.runs.log import DATA_KEY, chunk_name, ordered_events
from paddock.runs.scrubbing import Scrubber

WHEN = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def test_stamp_numbers_times_and_cuts() -> None:
    event = stamp(Draft("message", "a\nb   c", {"text": "x" * 20000}), 7, WHEN)
    assert event["seq"] == 7
    assert event["time"] == "2026-11-29T12:00:00.000Z"
    assert event["summary"] == "a b c"
    assert len(event["data"]["text"]) < 17000
    assert event["data"]["text"].endswith("more characters]")


def test_scrub_masks_secrets_everywhere_in_an_event() -> None:
    secret = "sk-live-0123456789"
    draft = Draft(
        "tool.result",
        f"token {secret}",
        {"output": f"a {secret} b", "nested": [{"env": f"KEY={secret}"}], "n": 3},
    )
    event = stamp(draft, 0, WHEN, Scrubber([secret, "ab"]))  # too short a value is not masked
    text = json.dumps(event)
    assert secret not in text
    assert event["data"]["nested"][0]["env"] == "KEY=[redacted]"
    assert event["data"]["n"] == 3
    assert Scrubber(["ab"])("ab cd") == "ab cd"


def test_summary_folds_events_and_refuses_gaps() -> None:
    summary = RunSummary()
    drafts = [
        Draft(ev.SESSION_ID, data={"sessionId": "s1"}),
        Draft(ev.RESULT, data={"costUsd": 0.5, "inputTokens": 10, "outputTokens": 2}),
        Draft(ev.FILE_CHANGED, data={"files": [{"path": "a", "status": "modified"}]}),
        Draft(ev.RUN_COMPLETED, data={"phase": "Succeeded"}),
    ]
    summary.add_all(stamp(d, i, WHEN) for i, d in enumerate(drafts))
    assert summary.next_seq == 4
    assert summary.session_id == "s1"
    assert summary.usage == {"costUsd": 0.5, "inputTokens": 10, "outputTokens": 2}
    assert summary.changed_files == ["a"]
    assert summary.terminal is not None
    with pytest.raises(ValueError, match="seq 6 where 4 was next"):
        summary.add(stamp(Draft("x"), 6, WHEN))


def _chunk(index: int, events: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {"paddock.dev/chunk": str(index)}},
        "data": {DATA_KEY: "".join(ev.encode(e) + "\n" for e in events)},
    }


def test_chunks_are_read_in_order_and_checked() -> None:
    events = [stamp(Draft("output", str(i)), i, WHEN) for i in range(5)]
    chunks = [_chunk(1, events[3:]), _chunk(0, events[:3])]
    assert [e["seq"] for e in ordered_events(chunks)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="seq 3 where 2"):
        ordered_events([_chunk(0, events[:2]), _chunk(1, events[3:])])


def test_chunk_names_fit_the_name_limit() -> None:
    assert chunk_name("run", 2) == "run-log-00002"
    assert len(chunk_name("r" * 253, 99999)) <= 253


def consume(
    stdout: bytes,
    files: bytes = b"",
    *,
    harness: Harness = Harness.COMMAND,
    cursor: dict[str, int] | None = None,
    final: bool = False,
) -> tuple[list[Draft], dict[str, int], bool]:
    consumed = journal.consume(
        HARNESSES[harness].parse_line,
        {"stdout": stdout, "files": files},
        cursor or {},
        None,
        final=final,
    )
    return consumed.drafts, consumed.cursor, consumed.more


def test_only_whole_lines_are_taken_until_the_harness_ends() -> None:
    drafts, cursor, more = consume(b"one\ntwo\nthr", b"created\ta.txt\n", cursor={"stdout": 100})
    assert [d.summary for d in drafts] == ["one", "two", "created a.txt"]
    assert cursor == {"stdout": 108, "files": 14}
    assert more is False
    drafts, cursor, _ = consume(b"thr", cursor={"stdout": 100}, final=True)
    assert [d.summary for d in drafts] == ["thr"]
    assert cursor["stdout"] == 103


def test_a_line_longer_than_a_poll_is_taken_cut_not_waited_for_forever() -> None:
    drafts, cursor, more = consume(b"x" * POLL_BYTES)
    assert len(drafts) == 1
    assert cursor["stdout"] == POLL_BYTES
    assert more is True


def test_a_big_batch_stops_at_a_line_and_says_more_is_waiting() -> None:
    line = b"y" * 1000 + b"\n"
    drafts, cursor, more = consume(line * 240)  # under POLL_BYTES
    assert more is True
    assert cursor["stdout"] == len(drafts) * len(line) < 240 * len(line)


def test_a_repeated_session_id_is_not_a_new_event() -> None:
    line = b'{"type":"system","subtype":"init","session_id":"s1"}\n'
    drafts, _, _ = consume(line + line, harness=Harness.CLAUDE_CODE)
    assert [d.type for d in drafts] == ["session-id"]
