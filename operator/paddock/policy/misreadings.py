"""Where shfmt's syntax tree and bash read the same text differently, found node by node: the
text is refused (the reader raises ShellSyntaxError), since what bash runs there is not what
the tree says.

- A here-document's body: bash reads it line by line and ends it at the first line that is
  its delimiter (backslash-newline joined where the delimiter is unquoted, leading tabs gone
  for ``<<-``; inside ``$(...)`` also a line of the delimiter and a ``)``); shfmt parses
  quotes and expansions in the body and may carry them past that line.
- A backquoted command: bash ends it at the first backquote no backslash escapes, whatever
  quotes come before; shfmt honours quotes inside it.
- ``!(...)`` at a command's start: bash reads ``!`` and a subshell; shfmt, an extended glob.
- Single quotes inside ``${...}`` in an unquoted here-document's body: bash keeps them as
  text and expands what they hold (as in double quotes, which the reader checks).

And in the text itself (``script_bytes``): a ``$`` before a backslash-newline (bash joins
the lines first, and expands ``$(...)`` where shfmt reads text, in quotes), a backslash
before a carriage return, a carriage return where a here-document is (a word character to
bash, in its delimiter), a NUL, text that is not UTF-8.
"""

from __future__ import annotations

from typing import Any

from paddock.policy.shfmt import ShellSyntaxError, nodes
from paddock.policy.words import word

Node = dict[str, Any]
# Single-quoted text inside ${...} that bash expands, where the quotes are text to it.
EXPANDED_IN_QUOTES = frozenset('$`\\"}')


def script_bytes(text: str) -> bytes:
    """The script as shfmt reads it: a carriage return is read as a newline (so ``ls\\rcurl``
    is two commands, which bash would read as one name). ShellSyntaxError where that, or
    the text, would be read otherwise by bash."""
    if "\x00" in text:
        raise ShellSyntaxError("it holds a NUL character, which no shell command can")
    if "\\\r" in text:
        raise ShellSyntaxError(
            "a backslash before a carriage return, which bash reads as a quoted character "
            "and the parser as a line continuation"
        )
    if "$\\\n" in text:
        raise ShellSyntaxError("a $ before a backslash-newline: bash joins the lines first")
    if "\r" in text and "<<" in text:
        raise ShellSyntaxError("a carriage return by a here-document: a word character to bash")
    try:
        return text.replace("\r\n", "\n").replace("\r", "\n").encode()
    except UnicodeEncodeError:
        raise ShellSyntaxError("it is not UTF-8 text") from None


def problem(node: Node, data: bytes) -> str | None:
    """How bash reads this node of the tree otherwise than shfmt did; None when it does not."""
    if node.get("Op") in ("<<", "<<-") and node.get("Hdoc") and node.get("Word"):
        return _here_document(node, data)
    if node.get("Type") == "CmdSubst" and node.get("Backquotes"):
        return _backquotes(node, data)
    if node.get("Type") == "CallExpr":
        first = ((node.get("Args") or [{}])[0].get("Parts") or [{}])[0]
        if first.get("Type") == "ExtGlob" and first.get("Op") == "!(":
            return "`!(` at a command's start: bash reads ! and a subshell, the parser a glob"
    return None


def _here_document(redirect: Node, data: bytes) -> str | None:
    delimiter_node = redirect["Word"]
    delimiter = word(delimiter_node, data).pattern
    raw = _text(delimiter_node, data)
    quoted = any(mark in raw for mark in "'\"\\")
    body = _text(redirect["Hdoc"], data)
    lines = body.split("\n")[:-1]  # the last is the delimiter's own line
    if not quoted:
        lines = _joined(lines)
    for line in lines:
        read = line.lstrip("\t") if redirect["Op"] == "<<-" else line
        if read == delimiter or read.startswith(delimiter + ")"):
            return f"a here-document that bash ends earlier, at the line {read!r}"
    for inner in [] if quoted else nodes(redirect["Hdoc"].get("Parts") or [], stop="CmdSubst"):
        if inner.get("Type") == "SglQuoted" and EXPANDED_IN_QUOTES & set(inner.get("Value", "")):
            return "single quotes inside ${...} in a here-document: bash expands what they hold"
    return None


def _joined(lines: list[str]) -> list[str]:
    """The lines bash reads from an unquoted here-document: one ending in an odd number of
    backslashes continues on the next."""
    found: list[str] = []
    pending = ""
    for line in lines:
        if (len(line) - len(line.rstrip("\\"))) % 2:
            pending += line[:-1]
            continue
        found.append(pending + line)
        pending = ""
    return found + ([pending] if pending else [])


def _backquotes(node: Node, data: bytes) -> str | None:
    start, end = node["Pos"]["Offset"], node["End"]["Offset"]
    backslashes = 0
    while start - backslashes > 0 and data[start - backslashes - 1] == ord("\\"):
        backslashes += 1
    if backslashes % 2:
        return None  # an escaped one, nested in another: that one's end is checked
    index = start + 1
    while index < len(data):
        if data[index : index + 1] == b"\\":
            index += 2
            continue
        if data[index : index + 1] == b"`":
            break
        index += 1
    if index + 1 != end:
        return "a backquoted command that bash ends at an earlier backquote"
    return None


def _text(node: Node, data: bytes) -> str:
    return data[node["Pos"]["Offset"] : node["End"]["Offset"]].decode(errors="replace")
