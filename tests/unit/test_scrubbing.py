"""Known secret values are masked in every form a program is likely to print them in, and
where the journal is cut into pieces."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from urllib.parse import quote

import pytest

from paddock.api.agentrun import Harness
from paddock.harness import HARNESSES
from paddock.render import run_scripts
from paddock.runs import journal
from paddock.runs.events import stamp
from paddock.runs.scrubbing import SECRET_MASK, Scrubber

TOKEN = "ghp_7d1e0cNeverToBeSeen42"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBX9wYq0FakeFakeFakeFakeFakeFakeFakeFakeFakeFakeAAAAJgAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_value_from_a_file_is_masked_without_its_trailing_newline() -> None:
    scrub = Scrubber([TOKEN + "\n"])
    assert scrub(f"token={TOKEN}; done") == f"token={SECRET_MASK}; done"


def test_a_multi_line_key_is_masked_line_by_line() -> None:
    scrub = Scrubber([PEM])
    body_lines = PEM.splitlines()[1:3]
    for line in body_lines:
        assert line not in scrub(f"> {line}")
    assert PEM not in scrub(f"key:\n{PEM}")


@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc"])
def test_a_value_is_masked_in_base64_at_any_alignment(prefix: str) -> None:
    scrub = Scrubber([TOKEN])
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode(f"{prefix}user:{TOKEN}:rest".encode()).decode()
        masked = scrub(f"Authorization: Basic {encoded}")
        assert SECRET_MASK in masked
        decoded = base64.b64decode(masked.split()[-1].split("[")[0] + "===", validate=False)
        assert TOKEN.encode() not in decoded


def test_a_value_is_masked_url_encoded() -> None:
    secret = "p@ss/w0rd+with spaces&more"
    scrub = Scrubber([secret])
    assert quote(secret, safe="") not in scrub(f"https://x/?q={quote(secret, safe='')}")


def test_a_value_used_as_a_key_of_an_event_is_masked() -> None:
    """A tool's input may use a secret as a map key (a header name, an env entry)."""
    scrub = Scrubber([TOKEN])
    data = {"input": {"headers": {TOKEN: "x"}, "list": [{f"k-{TOKEN}": TOKEN}]}}
    masked = json.dumps(scrub(data))
    assert TOKEN not in masked
    assert masked.count(SECRET_MASK) == 3


def test_short_values_mask_nothing() -> None:
    assert Scrubber(["ab", ""])("ab cd") == "ab cd"


def test_a_value_straddling_a_journal_cut_is_read_whole_and_masked() -> None:
    scrub = Scrubber([TOKEN])
    keep = scrub.longest - 1
    data = b"x" * (journal.POLL_BYTES - 10) + TOKEN.encode() + b"y" * 100
    parse = HARNESSES[Harness.COMMAND].parse_line
    seen, cursor = [], {"stdout": 0}
    while cursor["stdout"] < len(data):
        piece = data[cursor["stdout"] : cursor["stdout"] + journal.POLL_BYTES]
        final = cursor["stdout"] + len(piece) >= len(data)
        consumed = journal.consume(parse, {"stdout": piece}, cursor, None, final=final, keep=keep)
        seen += [stamp(d, 0, WHEN, scrub) for d in consumed.drafts]
        cursor = consumed.cursor
    text = json.dumps(seen)
    assert TOKEN not in text
    assert TOKEN[: len(TOKEN) // 2] not in text or SECRET_MASK in text
    assert "".join(e["data"]["text"] for e in seen).count(SECRET_MASK) == 1


def test_a_cut_stderr_tail_starts_at_a_whole_line() -> None:
    body = b"e" * (run_scripts.STDERR_BYTES - 15) + b"\nlast\n"  # 15 bytes left for the head
    stderr = b"to-secret-to" + b"ken-tail\n" + body
    tail = stderr[-run_scripts.STDERR_BYTES :]  # what the poll script sends
    assert tail.startswith(b"ken-tail\n")
    encoded = base64.b64encode(tail).decode()
    poll = run_scripts.parse_poll(
        f"alive 0\nexit {base64.b64encode(b'0 n').decode()}\nstderr {encoded}\n"
    )
    assert not poll.stderr_tail.startswith("ken-tail")
    assert poll.stderr_tail.endswith("last\n")
