"""Masking known secret values wherever they show: whole, trimmed, line by line, and in the
encodings a program is likely to print them in (base64 at any alignment, URL encoding). Pure.

A Secret made with ``kubectl create secret --from-file`` ends in a newline; a PEM key spans many
lines and a harness prints it one line an event; a token goes into a URL or an Authorization
header encoded. Each of those forms is masked.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from functools import cached_property
from typing import Any
from urllib.parse import quote, quote_plus

SECRET_MASK = "[redacted]"  # noqa: S105  (the mask, not a secret)
MIN_WHOLE = 4  # shorter values would mask ordinary text
MIN_PART = 8  # a line of a multi-line value, or an encoded core, is masked from this length


def _base64_cores(raw: bytes) -> set[str]:
    """What any base64 text containing ``raw`` contains, whatever the alignment of ``raw`` in
    the encoded stream: for each offset, the characters that only ``raw``'s bits decide."""
    cores = set()
    for offset in range(3):
        start = (8 * offset + 5) // 6
        end = (8 * (offset + len(raw))) // 6
        padded = bytes(offset) + raw
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(padded).decode()[start:end]
            if len(core) >= MIN_PART:
                cores.add(core)
    return cores


def json_escaped(text: str) -> str:
    """The text as a JSON string holds it, without the quotes (as JSON.stringify and Python's
    json.dumps without ensure_ascii write it: a transcript's, a config file's)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def variants(secret: str) -> set[str]:
    """Every form of one secret value that is masked."""
    whole = {secret, secret.strip()}
    forms = set(whole)
    lines = [line.strip() for line in secret.splitlines()]
    if len(lines) > 1:
        forms |= {line for line in lines if len(line) >= MIN_PART}
    for form in list(forms):
        forms |= {quote(form, safe=""), quote_plus(form, safe="")}
        forms |= _base64_cores(form.encode())
        forms.add(json_escaped(form))
    whole |= {json_escaped(form) for form in whole}
    return {f for f in forms if len(f) >= (MIN_WHOLE if f in whole else MIN_PART)}


class Scrubber:
    """Masks a run's known secret values in every string of an event."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        found: set[str] = set()
        for secret in secrets:
            found |= variants(secret)
        # Longest first, so that a value masks whole before a part of it could.
        self.forms = sorted(found, key=len, reverse=True)

    @cached_property
    def longest(self) -> int:
        """The length of the longest masked form: text cut into pieces keeps this many
        characters together to mask what straddles a cut."""
        return len(self.forms[0]) if self.forms else 0

    def text(self, value: str) -> str:
        for form in self.forms:
            if form in value:
                value = value.replace(form, SECRET_MASK)
        return value

    def __call__(self, value: Any) -> Any:
        if not self.forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            # Keys too: a tool's input can use a value as a key (a header name, a map entry).
            return {self(key): self(part) for key, part in value.items()}
        if isinstance(value, list):
            return [self(part) for part in value]
        return value


class StreamScrubber:
    """Masks single-line secret values in bytes that come in pieces cut anywhere (a response
    streamed back): what could be the start of a value is held back until the next piece, but
    never past a line's end, which no single-line value spans (an event stream's lines pass
    whole at once)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        lines = [s.strip() for s in secrets if s.strip() and "\n" not in s.strip()]
        # Matched as the bytes they are: UTF-8 read as Latin-1 (one character a byte).
        self._scrubber = Scrubber(s.encode().decode("latin-1") for s in lines)
        self._held = ""

    def header(self, value: str) -> str:
        return self._scrubber.text(value)

    def feed(self, piece: bytes) -> bytes:
        text = self._scrubber.text(self._held + piece.decode("latin-1"))
        keep = min(max(self._scrubber.longest - 1, 0), len(text) - (text.rfind("\n") + 1))
        self._held = text[len(text) - keep :]
        return text[: len(text) - keep].encode("latin-1")

    def end(self) -> bytes:
        """What was held back, masked: the stream's end."""
        text, self._held = self._scrubber.text(self._held), ""
        return text.encode("latin-1")
