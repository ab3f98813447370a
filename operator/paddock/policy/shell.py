"""Reading a shell command the way bash will run it: every simple command, wherever it sits,
with its words unquoted, and every redirection that writes a file.

The parser is shfmt (mvdan/sh, through its ``--to-json`` syntax tree): a complete bash parser
that refuses what bash would not run, rather than recovering from errors with a guess. Nothing
here runs the command; shfmt only reads it.
"""

from __future__ import annotations

import contextlib
import json
import re
import resource
import shutil
import subprocess
import sysconfig
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

Node = dict[str, Any]

# Marks text only known at run time (a parameter, command or arithmetic expansion) inside a
# word's pattern. NUL can never be part of a shell word, so it cannot be forged.
DYNAMIC = "\x00"
PARSE_TIMEOUT = 10.0  # seconds; shfmt reads even a long script in milliseconds
SHFMT_CPU_SECONDS = 5
SHFMT_MEMORY = 256 << 20  # bytes of data
MAX_TREE_BYTES = 32 << 20  # shfmt's JSON of one command; a long setup script's is ~1 MiB
WRITE_OPERATORS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
# Where writing creates or changes no file.
NOT_FILES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/")
_GLOB_CHARS = frozenset("*?[")
_BRACES = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")  # {a,b} and {1..3} expand; {} does not


class ShellSyntaxError(ValueError):
    """The text is not a command bash would run."""


@dataclass(frozen=True)
class Word:
    """One word after quote removal. ``pattern`` holds DYNAMIC where the text is only known
    at run time; ``shown`` is the same text with those places as written (``$X``)."""

    pattern: str
    shown: str
    expands: bool = False  # unquoted glob or brace characters: bash may turn it into others

    @property
    def dynamic(self) -> bool:
        return DYNAMIC in self.pattern

    @property
    def literal(self) -> bool:
        """Whether bash runs exactly this text: nothing expands at run time."""
        return not self.dynamic and not self.expands


@dataclass(frozen=True)
class SimpleCommand:
    """A command with its arguments, as bash runs it (leading assignments left out), and the
    text its stdin gets from a here-document or here-string, if any."""

    words: tuple[Word, ...]
    source: str
    stdin: Word | None = None


@dataclass(frozen=True)
class FileWrite:
    """A redirection that opens a file for writing."""

    target: Word
    source: str


@dataclass(frozen=True)
class Script:
    commands: tuple[SimpleCommand, ...]
    writes: tuple[FileWrite, ...]


def parse(text: str) -> Script:
    """Every simple command and file write in ``text``; ShellSyntaxError when bash would not
    run it. A carriage return separates commands, as a newline does. Remembered: a sandbox's
    setup is judged at each of its reconciles, and shfmt runs once per command."""
    parsed = _parse(text)
    if isinstance(parsed, ShellSyntaxError):
        raise ShellSyntaxError(str(parsed))
    return parsed


@lru_cache(maxsize=4096)
def _parse(text: str) -> Script | ShellSyntaxError:
    try:
        return _read_script(text)
    except ShellSyntaxError as exc:
        return exc


def _read_script(text: str) -> Script:
    data = text.replace("\r\n", "\n").replace("\r", "\n").encode()
    tree = _syntax_tree(data)
    commands: list[SimpleCommand] = []
    writes: list[FileWrite] = []
    stdin: dict[int, Word] = {}  # by id() of a statement's command: its here-document
    for node in _nodes(tree):
        kind = node.get("Type")
        if isinstance(node.get("Cmd"), dict):  # a statement, seen before its command
            fed = _here_text(node.get("Redirs") or [], data)
            if fed is not None:
                stdin[id(node["Cmd"])] = fed
        if kind == "CallExpr" and node.get("Args"):
            words = tuple(_word(arg, data) for arg in node["Args"])
            commands.append(SimpleCommand(words, _source(node, data), stdin.get(id(node))))
        elif kind == "DeclClause":
            variant = Word(node["Variant"]["Value"], node["Variant"]["Value"])
            words = (variant, *(_assignment(arg, data) for arg in node.get("Args") or []))
            commands.append(SimpleCommand(words, _source(node, data)))
        elif kind == "LetClause":
            source = _source(node, data)
            commands.append(SimpleCommand((Word("let", "let"), _opaque(source[4:])), source))
        for redirect in node.get("Redirs") or []:
            write = _file_write(redirect, data)
            if write is not None:
                writes.append(write)
    return Script(tuple(commands), tuple(writes))


@cache
def shfmt_path() -> str:
    """shfmt as the ``shfmt-py`` wheel installs it: next to this Python, else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "shfmt"
    found = str(beside) if beside.is_file() else shutil.which("shfmt")
    if found is None:
        raise RuntimeError("shfmt is not installed (pip install shfmt-py)")
    return found


def _syntax_tree(data: bytes) -> Node:
    """shfmt's syntax tree of ``data``. Its JSON is indented by depth, so a deeply nested
    command makes a tree far larger than itself: shfmt gets bounded memory, CPU and time, and
    a tree over MAX_TREE_BYTES is refused, so no command can exhaust the operator."""
    process = subprocess.Popen(
        [shfmt_path(), "-ln", "bash", "--to-json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # Set before shfmt is given anything to read: it can allocate nothing large until then.
    resource.prlimit(process.pid, resource.RLIMIT_DATA, (SHFMT_MEMORY, SHFMT_MEMORY))
    resource.prlimit(process.pid, resource.RLIMIT_CPU, (SHFMT_CPU_SECONDS, SHFMT_CPU_SECONDS))
    timer = threading.Timer(PARSE_TIMEOUT, process.kill)
    timer.start()
    try:
        out = _read(process, data)
        err = process.stderr.read() if process.stderr else b""
        process.wait()
    finally:
        timer.cancel()
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    if out is None:
        raise ShellSyntaxError("too deeply nested to judge")
    if process.returncode != 0:
        message = err.decode(errors="replace").strip().removeprefix("<standard input>:")
        if process.returncode < 0 or message.startswith(("fatal error", "runtime:")):
            message = "too deeply nested to judge, or not parsed in time"
        raise ShellSyntaxError(message or "the command cannot be parsed")
    try:
        tree: Node = json.loads(out)
    except RecursionError:
        raise ShellSyntaxError("too deeply nested to judge") from None
    return tree


def _read(process: subprocess.Popen[bytes], data: bytes) -> bytes | None:
    """What shfmt writes for ``data``, or None past MAX_TREE_BYTES."""
    assert process.stdin is not None
    assert process.stdout is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write(data)
        process.stdin.close()
    chunks, size = [], 0
    while chunk := process.stdout.read(1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_TREE_BYTES:
            return None
    return b"".join(chunks)


def _nodes(tree: Node) -> Iterator[Node]:
    """Every node of the tree, in source order: a command nested anywhere is found. (A
    stack, not recursion: nesting as deep as shfmt accepts is fine.)"""
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))


def _source(node: Node, data: bytes) -> str:
    return data[node["Pos"]["Offset"] : node["End"]["Offset"]].decode(errors="replace")


def _opaque(text: str) -> Word:
    return Word(text, text, expands=True)


def _file_write(redirect: Node, data: bytes) -> FileWrite | None:
    op, word = redirect["Op"], redirect.get("Word")
    if word is None:
        return None
    target = _word(word, data)
    if op == ">&" and (target.pattern.isdigit() or target.pattern == "-"):
        return None  # duplicates or closes a descriptor: no file is opened
    if op not in WRITE_OPERATORS and op != ">&":
        return None
    if target.literal and target.pattern.startswith(NOT_FILES):
        return None
    return FileWrite(target, _source(redirect, data))


def _here_text(redirects: list[Node], data: bytes) -> Word | None:
    """What the last here-document (<<, <<-) or here-string (<<<) feeds to stdin."""
    fed = None
    for redirect in redirects:
        if redirect["Op"] in ("<<", "<<-") and redirect.get("Hdoc") is not None:
            fed = _word(redirect["Hdoc"], data)
        elif redirect["Op"] == "<<<" and redirect.get("Word") is not None:
            fed = _word(redirect["Word"], data)
        elif redirect["Op"] in ("<", "<&", "<>"):
            fed = None  # stdin is a file: its text is not known
    return fed


def _assignment(node: Node, data: bytes) -> Word:
    """An argument of export/declare/local/readonly: NAME, NAME=VALUE or a plain word."""
    name = (node.get("Name") or {}).get("Value", "")
    value = node.get("Value")
    if node.get("Naked"):
        return _word(value, data) if value else Word(name, name)
    if node.get("Array") is not None or value is None:
        source = _source(node, data)
        return Word(source, source, expands=node.get("Array") is not None)
    inner = _word(value, data)
    sign = "+=" if node.get("Append") else "="
    return Word(name + sign + inner.pattern, name + sign + inner.shown, inner.expands)


def _word(node: Node, data: bytes) -> Word:
    pattern: list[str] = []
    shown: list[str] = []
    expands = False
    for part in node.get("Parts") or []:
        kind = part["Type"]
        if kind == "Lit":
            text = _unescape(part.get("Value", ""), quoted=False)
            expands = expands or _expands(text)
            pattern.append(text)
            shown.append(text)
        elif kind == "SglQuoted":
            text = _ansi_c(part.get("Value", "")) if part.get("Dollar") else part.get("Value", "")
            pattern.append(text)
            shown.append(text)
        elif kind == "DblQuoted":
            quoted_pattern, quoted_shown = _double_quoted(part, data)
            pattern += quoted_pattern
            shown += quoted_shown
        elif kind == "ExtGlob":
            text = _source(part, data)
            expands = True
            pattern.append(text)
            shown.append(text)
        else:  # ParamExp, CmdSubst, ArithmExp, ProcSubst: known only at run time
            pattern.append(DYNAMIC)
            shown.append(_source(part, data))
    return Word("".join(pattern), "".join(shown), expands)


def _double_quoted(node: Node, data: bytes) -> tuple[list[str], list[str]]:
    pattern: list[str] = []
    shown: list[str] = []
    for part in node.get("Parts") or []:
        if part["Type"] == "Lit":
            text = _unescape(part.get("Value", ""), quoted=True)
            pattern.append(text)
            shown.append(text)
        else:
            pattern.append(DYNAMIC)
            shown.append(_source(part, data))
    return pattern, shown


def _expands(text: str) -> bool:
    """Unquoted text that bash's pathname or brace expansion may turn into other words."""
    if any(char in _GLOB_CHARS for char in text) and text not in ("[", "[["):
        return True
    return _BRACES.search(text) is not None


def _unescape(text: str, *, quoted: bool) -> str:
    """Backslash removal: unquoted, a backslash quotes any character (and drops a newline);
    inside double quotes, only $ ` " \\ and newline."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, "")
        if following == "\n":
            continue
        if quoted and following not in '$`"\\':
            out.append("\\")
        out.append(following)
    return "".join(out)


_ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI_C |= {"t": "\t", "v": "\v"}
_ANSI_C_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)


def _ansi_c(text: str) -> str:
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
