"""Approvals: a request the policy says to ask a person about, and what became of it."""

from __future__ import annotations

import hashlib
import unicodedata
from datetime import datetime
from enum import StrEnum

from pydantic import Field

from paddock.api.common import ApiModel

# A person's decision on an approval request: the annotation approval.paddock.dev/<id> on
# the run, one of ApprovalChoice's values, then ":" and the digest of the text decided on
# (``decision``): an approval that names other text than the request's is a denial.
APPROVAL_ANNOTATION = "approval.paddock.dev/"
# Who decided a request, beside the decision (written by the console and the MCP server over
# HTTP, which know the caller's identity; the operator never reads it).
DECIDED_BY_ANNOTATION = "decided-by.approval.paddock.dev/"


class ApprovalChoice(StrEnum):
    APPROVE = "approve"
    ALWAYS = "approve-always"  # also every later request of the same rules in the run
    DENY = "deny"


class ApprovalState(StrEnum):
    PENDING = "Pending"
    APPROVED = "Approved"
    DENIED = "Denied"
    EXPIRED = "Expired"


class Approval(ApiModel):
    """A request the policy says to ask a person about, and what became of it."""

    id: str = Field(description="The request's id: name it to paddock approve or deny.")
    kind: str = Field(
        description="What is asked for: command, file-write (a file the agent would write) or "
        "network (a host it would reach)."
    )
    target: str = Field(
        description="The command, file or host: whole while pending (a decision names its "
        "digest), abridged once decided."
    )
    digest: str | None = Field(
        default=None,
        description="sha256:HEX of the whole text asked about: an approval names it "
        "(approve:sha256:HEX), so that it allows only the text that was shown.",
    )
    rules: list[str] = Field(default_factory=list, description="The policy rules that said to ask.")
    state: ApprovalState = Field(description="Pending, Approved, Denied or Expired.")
    always: bool = Field(
        default=False,
        description="Approved for the rest of the run: later requests that only these rules "
        "ask about are allowed.",
    )
    requested_at: datetime = Field(description="When the agent asked.")
    resolved_at: datetime | None = Field(default=None, description="When it was decided.")
    message: str | None = Field(default=None, description="How it was decided.")


def digest_of(text: str) -> str:
    """What a decision names: the digest of the exact text asked about."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def decision(choice: ApprovalChoice, digest: str) -> str:
    """The annotation's value deciding the request whose text has ``digest``."""
    return f"{choice}:{digest}"


def parse_decision(value: str) -> tuple[ApprovalChoice, str] | None:
    """The choice and the digest an annotation's value names ("" when it names none); None
    when it is no decision."""
    choice, _, digest = value.partition(":")
    return (ApprovalChoice(choice), digest) if choice in set(ApprovalChoice) else None


OPEN, CLOSE = "\u27e6", "\u27e7"  # the marks around a character shown by its code point
# Characters drawn as nothing or as something else, whatever their category says: blank
# letters and symbols, the combining grapheme joiner, Khmer's inherent vowels, the object
# replacement character, and variation selectors.
BLANK = frozenset(
    "\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5\ufffc\U0001d159"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)
MAX_MARKS = 2  # combining marks a letter of another script shows before they are escaped


def visible(text: str) -> str:
    """The text as a person must see it to know what runs: each character that shows as
    nothing, moves or hides others, or is not plain text (controls but the newline, format
    characters such as bidirectional overrides and zero-width ones, separators other than
    the space, private-use, unassigned and surrogate code points, blank letters, variation
    selectors, and a combining mark on an ASCII character or past the second on another) as
    its code point between marks, ⟦U+202E⟧; the
    marks themselves too, so that no text can fake one. Every face showing a request to
    decide on shows this."""
    shown, base, marks = [], "", 0  # base: the last character that is no combining mark
    for char in text:
        mark = unicodedata.category(char)[0] == "M"
        marks = marks + 1 if mark else 0
        stacked = mark and (not base or base.isascii() or marks > MAX_MARKS)
        shown.append(
            char if not _hidden(char) and not stacked else f"{OPEN}U+{ord(char):04X}{CLOSE}"
        )
        base = base if mark else char
    return "".join(shown)


def _hidden(char: str) -> bool:
    if char == "\n":
        return False
    if char in (OPEN, CLOSE) or char in BLANK:
        return True
    category = unicodedata.category(char)
    return category[0] == "C" or (category[0] == "Z" and char != " ")
