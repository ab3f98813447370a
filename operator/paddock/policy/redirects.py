"""Redirections: what a command's stdin reads (a shell reads its script there), which
redirections write a file, and which open a connection (bash's ``/dev/tcp/HOST/PORT``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from paddock.policy.words import DYNAMIC, HERE_DOCUMENT_ESCAPES, Word, source, unescape_double, word

Node = dict[str, Any]

WRITE_OPERATORS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
# Where writing creates or changes no file; /dev/stdout, /dev/stderr and /dev/fd/N only while
# their descriptor is not opened onto a file (then writing them writes that file).
NOT_FILES = frozenset({"/dev/null", "/dev/tty"})
DESCRIPTORS = {"/dev/stdout": "1", "/dev/stderr": "2"}
CONNECTIONS = ("/dev/tcp/", "/dev/udp/")
_FD_PATH = re.compile(r"^/dev/fd/([0-9]+)$")


@dataclass(frozen=True)
class FileWrite:
    """A redirection that opens a file for writing; ``descriptor``: one that writes
    /dev/fd/N (or /dev/stdout, /dev/stderr) where the script opened N onto no file, which
    writes a file only if the command opened N onto one elsewhere (``eval``, a ``bash -c``
    given ``N<FILE``)."""

    target: Word
    source: str
    descriptor: str | None = None


def stdin(redirects: list[Node], data: bytes) -> tuple[Word | None, bool]:
    """What a command's fd 0 reads: the text of its last here-document or here-string, or a
    file of its own (True). Neither: stdin is what it inherits or a pipe (``/dev/stdin`` and
    a copied descriptor are that too)."""
    fed: tuple[Word | None, bool] = (None, False)
    for redirect in redirects:
        if (redirect.get("N") or {}).get("Value", "0") != "0":
            continue  # another descriptor: not what a shell reads its script from
        op = redirect["Op"]
        if op in ("<<", "<<-") and redirect.get("Hdoc") is not None:
            fed = (_here_document(redirect, data), False)
        elif op == "<<<" and redirect.get("Word") is not None:
            fed = (word(redirect["Word"], data), False)
        elif op in ("<", "<>") and redirect.get("Word") is not None:
            fed = (None, plain_file(word(redirect["Word"], data)))
        elif op == "<&":
            fed = (None, False)
    return fed


def plain_file(target: Word) -> bool:
    """Whether a path names a file of its own, as written: not a descriptor, a process's
    file, or a path only known at run time."""
    return target.literal and not target.pattern.startswith(("/dev/", "/proc/"))


def _here_document(redirect: Node, data: bytes) -> Word:
    """A here-document's text: as written when its delimiter is quoted; else with
    ``\\$ \\` \\\\`` and backslash-newline unescaped, and its expansions known at run time;
    each line's leading tabs gone for ``<<-``."""
    delimiter = redirect.get("Word") or {}
    quoted = any(
        part["Type"] != "Lit" or "\\" in part.get("Value", "")
        for part in delimiter.get("Parts") or []
    )
    pattern: list[str] = []
    shown: list[str] = []
    for part in redirect["Hdoc"].get("Parts") or []:
        if part["Type"] == "Lit":
            raw = part.get("Value", "")
            text = raw if quoted else unescape_double(raw, HERE_DOCUMENT_ESCAPES)
            pattern.append(text)
            shown.append(text)
        else:
            pattern.append(DYNAMIC)
            shown.append(source(part, data))
    if redirect["Op"] == "<<-":
        return Word(_untabbed("".join(pattern)), _untabbed("".join(shown)))
    return Word("".join(pattern), "".join(shown))


def _untabbed(text: str) -> str:
    return re.sub(r"(^|\n)\t+", r"\1", text)


def _default_fd(op: str) -> str:
    return "0" if op.startswith("<") else "1"


def _descriptor(target: Word) -> str | None:
    """The descriptor a write to /dev/stdout, /dev/stderr or /dev/fd/N writes."""
    if not target.literal:
        return None
    found = _FD_PATH.match(target.pattern)
    return found.group(1) if found else DESCRIPTORS.get(target.pattern)


def writes(redirects: list[Node], data: bytes) -> tuple[list[FileWrite], set[str]]:
    """The redirections that write a file, and the descriptors the script opens onto files
    ("*": one named at run time, ``{fd}<file``). Writing /dev/stdout, /dev/stderr or
    /dev/fd/N writes nothing new unless some redirection opened that descriptor onto a file
    (``3<README >/dev/fd/3`` writes README)."""
    opened: set[str] = set()
    copies: list[tuple[str, str]] = []  # (descriptor, the one it copies)
    named = False  # {fd}<file: which descriptor is not known
    targets: list[tuple[Node, Word]] = []
    for redirect in redirects:
        op, node = redirect["Op"], redirect.get("Word")
        if node is None or op in ("<<", "<<-", "<<<"):
            continue
        fd = (redirect.get("N") or {}).get("Value", _default_fd(op))
        named = named or not fd.isdigit()
        target = word(node, data)
        if _process_substitution(node):
            continue
        if op in (">&", "<&") and (target.pattern.isdigit() or target.pattern == "-"):
            copies.append((fd, target.pattern))
            continue
        descriptor = _descriptor(target)
        if descriptor is not None:
            copies.append((fd, descriptor))
        elif not (target.literal and target.pattern in NOT_FILES):
            opened.update({"1", "2"} if op in ("&>", "&>>", ">&") and fd == "1" else {fd})
        if op in WRITE_OPERATORS or op == ">&":
            targets.append((redirect, target))
    changed = True
    while changed:
        changed = False
        for fd, copied in copies:
            if copied in opened and fd not in opened:
                opened.add(fd)
                changed = True
    found = []
    for redirect, target in targets:
        if target.literal and target.pattern in NOT_FILES:
            continue
        descriptor = _descriptor(target)
        free = descriptor is not None and not named and descriptor not in opened
        found.append(FileWrite(target, source(redirect, data), descriptor if free else None))
    return found, opened | ({"*"} if named else set())


def connections(redirects: list[Node], data: bytes) -> list[Word]:
    """The redirections, reading or writing, that bash opens as a network connection: a
    target spelled ``/dev/tcp/HOST/PORT`` or ``/dev/udp/...`` (bash matches the text, so
    ``//dev/tcp/...`` is a missing file). One only known at run time is not followed."""
    found = []
    for redirect in redirects:
        if redirect.get("Word") is not None and redirect["Op"] not in ("<<", "<<-", "<<<"):
            target = word(redirect["Word"], data)
            if target.pattern.startswith(CONNECTIONS):
                found.append(target)
    return found


def _process_substitution(node: Node) -> bool:
    parts = node.get("Parts") or []
    return len(parts) == 1 and parts[0]["Type"] == "ProcSubst"
