"""A shell word as bash makes it: quotes and backslashes removed, brace expansion done, and
each place whose text is only known at run time marked.

A word is first read into characters, each known to be active (unquoted, so brace and
pathname expansion apply to it), quoted, or a run-time expansion. Brace expansion is done
here, as bash does it before anything else, so ``{c'u'rl,x}`` is the two words ``curl x``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from paddock.policy.protected import HOME

Node = dict[str, Any]

# Marks text only known at run time (a parameter, command or arithmetic expansion) inside a
# word's pattern. The engine refuses a command holding NUL, so it cannot be forged.
DYNAMIC = "\x00"
MAX_BRACE_WORDS = 256  # {1..100000} is judged as "many words, known at run time"
MAX_BRACES = 64  # braces in one word: more are judged as many words known at run time
_GLOB_CHARS = frozenset("*?[")
DOUBLE_QUOTE_ESCAPES = '$`"\\'
HERE_DOCUMENT_ESCAPES = "$`\\"
_SEQUENCE = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")


@dataclass(frozen=True)
class Word:
    """One word after expansion. ``pattern`` holds DYNAMIC where the text is only known at
    run time; ``shown`` is the same text with those places as written (``$X``)."""

    pattern: str
    shown: str
    expands: bool = False  # unquoted glob characters: bash may turn it into other words
    splits: bool = False  # an unquoted expansion (or "$@"): it may become several words, or none

    @property
    def dynamic(self) -> bool:
        return DYNAMIC in self.pattern

    @property
    def single(self) -> bool:
        """Whether bash makes exactly one word of it (its text may still be unknown)."""
        return not self.expands and not self.splits

    @property
    def literal(self) -> bool:
        """Whether bash runs exactly this text: nothing expands at run time."""
        return not self.dynamic and self.single


class Kind(Enum):
    ACTIVE = 1  # unquoted: brace and pathname expansion see it
    QUOTED = 2
    SPLIT = 3  # an unquoted expansion, or "$@": field splitting applies
    FIXED = 4  # a quoted expansion: one word, text unknown
    GLOB = 5  # an extended glob, @(...)


@dataclass(frozen=True)
class Char:
    pattern: str
    shown: str
    kind: Kind


def words(node: Node, data: bytes, braces: bool = True) -> list[Word]:
    """The words bash makes of one word of the command line (brace expansion applied, unless
    ``braces`` is off: dash has none)."""
    chars = _chars(node, data)
    if not braces:
        return [_make(chars)] if chars else []
    try:
        expanded = _braces(chars)
    except _TooManyWordsError:
        return [Word(DYNAMIC, source(node, data), expands=True, splits=True)]
    return [_make(item) for item in expanded if item]


def _braces(chars: list[Char]) -> list[list[Char]]:
    """Bash's brace expansion of one word (a word with more braces than MAX_BRACES is
    judged as many words known at run time: reading it would take quadratic time)."""
    if sum(c.kind == Kind.ACTIVE and c.pattern == "{" for c in chars) > MAX_BRACES:
        raise _TooManyWordsError
    return _expand(chars)


def word(node: Node, data: bytes) -> Word:
    """A word bash does not brace-expand (an assignment's value, a redirection's target):
    where braces would make several words, it is marked as expanding."""
    chars = _chars(node, data)
    made = _make(chars)
    if any(c.kind == Kind.ACTIVE and c.pattern == "{" for c in chars):
        try:
            several = len(_braces(chars)) != 1
        except _TooManyWordsError:
            several = True
        if several:
            return Word(made.pattern, made.shown, expands=True, splits=made.splits)
    return made


def _tilde(chars: list[Char]) -> list[Char]:
    """Tilde expansion of a word's start: ``~`` and ``~/...`` are the sandbox's HOME;
    ``~user``, ``~+`` and ``~-`` a directory only known at run time; a quoted ``~`` itself."""
    if not chars or chars[0].kind != Kind.ACTIVE or chars[0].pattern != "~":
        return chars
    end = next(
        (i for i, c in enumerate(chars) if c.kind == Kind.ACTIVE and c.pattern == "/"), len(chars)
    )
    prefix = chars[1:end]
    if any(c.kind != Kind.ACTIVE for c in prefix):
        return chars
    shown = "~" + "".join(c.shown for c in prefix)
    home = Char(HOME, shown, Kind.QUOTED) if not prefix else Char(DYNAMIC, shown, Kind.FIXED)
    return [home, *chars[end:]]


def _make(chars: list[Char]) -> Word:
    chars = _tilde(chars)
    pattern = "".join(c.pattern for c in chars)
    shown = "".join(c.shown for c in chars)
    globbing = any(
        c.kind == Kind.GLOB or (c.kind == Kind.ACTIVE and c.pattern in _GLOB_CHARS) for c in chars
    )
    expands = globbing and pattern not in ("[", "[[")
    splits = any(c.kind == Kind.SPLIT for c in chars)
    return Word(pattern, shown, expands, splits)


def source(node: Node, data: bytes) -> str:
    """The text of a node of shfmt's tree, as written."""
    return data[node["Pos"]["Offset"] : node["End"]["Offset"]].decode(errors="replace")


def _chars(node: Node, data: bytes) -> list[Char]:
    chars: list[Char] = []
    for part in node.get("Parts") or []:
        kind = part["Type"]
        if kind == "Lit":
            chars += _unquoted(part.get("Value", ""))
        elif kind == "SglQuoted":
            value = part.get("Value", "")
            chars += _quoted(ansi_c(value) if part.get("Dollar") else value)
        elif kind == "DblQuoted":
            chars += _double_quoted(part, data)
        elif kind == "ExtGlob":
            text = source(part, data)
            chars.append(Char(text, text, Kind.GLOB))
        else:  # ParamExp, CmdSubst, ArithmExp, ProcSubst: known only at run time
            chars.append(Char(DYNAMIC, source(part, data), Kind.SPLIT))
    return chars


def _quoted(text: str) -> list[Char]:
    # An empty quoted string is still a word: a zero-width mark keeps it.
    return [Char(c, c, Kind.QUOTED) for c in text] or [Char("", "", Kind.QUOTED)]


def _unquoted(text: str) -> list[Char]:
    """Backslash removal outside quotes: a backslash quotes the next character; a
    backslash-newline is removed."""
    chars: list[Char] = []
    letters = iter(text)
    for letter in letters:
        if letter != "\\":
            chars.append(Char(letter, letter, Kind.ACTIVE))
            continue
        following = next(letters, "")
        if following and following != "\n":
            chars.append(Char(following, following, Kind.QUOTED))
    return chars


def _double_quoted(node: Node, data: bytes) -> list[Char]:
    chars: list[Char] = []
    for part in node.get("Parts") or []:
        if part["Type"] == "Lit":
            chars += _quoted(unescape_double(part.get("Value", "")))
        else:
            kind = Kind.SPLIT if _many_words(part) else Kind.FIXED
            chars.append(Char(DYNAMIC, source(part, data), kind))
    return chars or _quoted("")


def _many_words(part: Node) -> bool:
    """ "$@" and "${a[@]}" are a word per element, even quoted."""
    if part["Type"] != "ParamExp":
        return False
    if (part.get("Param") or {}).get("Value") == "@":
        return True
    index = part.get("Index") or {}
    index_parts = index.get("Parts") or []
    return len(index_parts) == 1 and index_parts[0].get("Value") == "@"


def unescape_double(text: str, escapes: str = DOUBLE_QUOTE_ESCAPES) -> str:
    """Backslash removal inside double quotes: only before $ ` " \\ and newline (in an
    unquoted here-document, ``"`` is not among them)."""
    out: list[str] = []
    letters = iter(text)
    for letter in letters:
        if letter != "\\":
            out.append(letter)
            continue
        following = next(letters, "")
        if following == "\n":
            continue
        if following not in escapes:
            out.append("\\")
        out.append(following)
    return "".join(out)


class _TooManyWordsError(Exception):
    """Brace expansion makes more than MAX_BRACE_WORDS words."""


def _expand(chars: list[Char]) -> list[list[Char]]:
    start = 0
    while True:
        opening = _next_active(chars, "{", start)
        if opening < 0:
            return [chars]
        closing, commas = _group(chars, opening)
        if closing < 0:
            return [chars]
        inner = chars[opening + 1 : closing]
        edges = [opening, *commas, closing]
        choices = [chars[a + 1 : b] for a, b in itertools.pairwise(edges)] if commas else None
        choices = choices or _sequence(inner)
        if choices is None:
            start = opening + 1
            continue
        return _combine(chars[:opening], choices, chars[closing + 1 :])


def _combine(prefix: list[Char], choices: list[list[Char]], suffix: list[Char]) -> list[list[Char]]:
    tails = _expand(suffix)
    made: list[list[Char]] = []
    for choice in choices:
        for middle in _expand(choice):
            for tail in tails:
                made.append(prefix + middle + tail)
                if len(made) > MAX_BRACE_WORDS:
                    raise _TooManyWordsError
    return made


def _next_active(chars: list[Char], letter: str, start: int) -> int:
    for index in range(start, len(chars)):
        if chars[index].kind == Kind.ACTIVE and chars[index].pattern == letter:
            return index
    return -1


def _group(chars: list[Char], opening: int) -> tuple[int, list[int]]:
    """The index of the ``}`` closing the ``{`` at ``opening`` and of its own commas."""
    depth, commas = 0, list[int]()
    for index in range(opening + 1, len(chars)):
        char = chars[index]
        if char.kind != Kind.ACTIVE:
            continue
        if char.pattern == "{":
            depth += 1
        elif char.pattern == "}":
            if depth == 0:
                return index, commas
            depth -= 1
        elif char.pattern == "," and depth == 0:
            commas.append(index)
    return -1, []


def _sequence(inner: list[Char]) -> list[list[Char]] | None:
    """``{1..5}``, ``{a..e}``, ``{0..10..2}``: the words, or None when it is not one."""
    if any(c.kind != Kind.ACTIVE for c in inner):
        return None
    found = _SEQUENCE.match("".join(c.pattern for c in inner))
    if found is None:
        return None
    first, last, step_text = found.groups()
    step = abs(int(step_text or 1)) or 1
    if first.lstrip("-").isdigit() != last.lstrip("-").isdigit():
        return None
    numeric = first.lstrip("-").isdigit()
    low, high = (int(first), int(last)) if numeric else (ord(first), ord(last))
    if abs(high - low) // step >= MAX_BRACE_WORDS:
        raise _TooManyWordsError
    values = range(low, high + (1 if high >= low else -1), step if high >= low else -step)
    texts = [str(v) if numeric else chr(v) for v in values]
    return [[Char(c, c, Kind.QUOTED) for c in text] for text in texts]


_ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI_C |= {"t": "\t", "v": "\v"}
_ANSI_C_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)


def ansi_c(text: str) -> str:
    """The value of $'...': bash's backslash escapes, up to the first NUL, where bash stops."""

    def escape(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU":
            return chr(min(int(code[1:], 16), 0x10FFFF))
        if code[0] in "01234567":
            return chr(int(code, 8))
        if code[0] == "c" and len(code) == 2:
            return chr(ord(code[1].upper()) ^ 0x40)
        if code in _ANSI_C:
            return _ANSI_C[code]
        return code if code in "\\'\"?" else "\\" + code

    return _ANSI_C_ESCAPE.sub(escape, text).split("\x00", 1)[0]
