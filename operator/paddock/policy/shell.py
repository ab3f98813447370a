"""Reading a shell command the way bash will run it: every simple command, wherever it sits,
with its words expanded as far as the text tells, every redirection that writes a file, what
is assigned to which variable, and the text bash evaluates again.

The parser is shfmt (mvdan/sh, through its ``--to-json`` syntax tree): a complete bash parser
that refuses what bash would not run, rather than recovering from errors with a guess. Where
shfmt and bash are known to read a text differently, the text is refused (ShellSyntaxError)
or the difference is reported as a hazard. Nothing here runs the command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from paddock.policy import arith, misreadings
from paddock.policy import redirects as redirects_
from paddock.policy.arith import Reading
from paddock.policy.builtins import COMPOUND, NAMEREF, NAMEREF_DECLARING
from paddock.policy.redirects import FileWrite
from paddock.policy.shfmt import ShellSyntaxError, nodes, syntax_tree
from paddock.policy.words import DYNAMIC, Word, source, word, words

Node = dict[str, Any]

ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
# bash's own integer variables: what each is given is evaluated as arithmetic, as a variable
# declared -i (SECONDS's and BASHPID's only when added to, +=: judged the same).
INTEGER_VARIABLES = frozenset({"RANDOM", "SRANDOM", "OPTIND", "HISTCMD", "SECONDS", "BASHPID"})
__all__ = ["DYNAMIC", "FileWrite", "ShellSyntaxError", "Word", "parse"]


@dataclass(frozen=True)
class SimpleCommand:
    """A command with its arguments, as bash runs it (its leading assignments are among the
    Script's values), and its stdin: the text of a here-document or here-string (``stdin``),
    or a file (``stdin_file``)."""

    words: tuple[Word, ...]
    source: str
    stdin: Word | None = None
    stdin_file: bool = False
    declaration: bool = False  # export/declare/local: its names and values are read already


@dataclass(frozen=True)
class Hazard:
    """A place bash may read otherwise than the parser did, or that runs what cannot be told."""

    text: str
    reason: str


@dataclass(frozen=True)
class Evaluated:
    """Text bash evaluates again (``how``: arithmetic; a name, behind ``${!x}``; a prompt,
    behind ``${x@P}``) and what it reads."""

    source: str
    reading: Reading
    how: str = "arithmetic"
    # The array whose subscript this is, where bash evaluates it only for an indexed array
    # (an associative array's key is expanded once, as text).
    array: str | None = None


@dataclass(frozen=True)
class Script:
    commands: tuple[SimpleCommand, ...]
    writes: tuple[FileWrite, ...]
    opened: frozenset[str]  # descriptors opened onto files ("*": one named at run time)
    connections: tuple[Word, ...]  # /dev/tcp/HOST/PORT
    # Every variable the script assigns and a text it may hold (None: not known).
    values: tuple[tuple[str, str | None], ...] = ()
    evaluated: tuple[Evaluated, ...] = ()
    hazards: tuple[Hazard, ...] = ()


def parse(text: str, posix: bool = False) -> Script:
    """Every simple command and file write in ``text``, read as bash does (``posix``: as dash
    does); ShellSyntaxError when that shell would not run it. A carriage return separates
    commands, as a newline does. Remembered: a sandbox's setup is judged at each of its
    reconciles, and shfmt runs once per command."""
    parsed = _parse(text, posix)
    if isinstance(parsed, ShellSyntaxError):
        raise ShellSyntaxError(str(parsed))
    return parsed


@lru_cache(maxsize=4096)
def _parse(text: str, posix: bool) -> Script | ShellSyntaxError:
    try:
        return _Reader(misreadings.script_bytes(text), posix).script()
    except ShellSyntaxError as exc:
        return exc


# What the reader does with each type of shfmt's nodes (the rest only hold these).
_READERS = {
    "CallExpr": "_call",
    "DeclClause": "_declaration",
    "ArithmCmd": "_arithmetic_command",
    "ArithmExp": "_arithmetic_command",
    "CStyleLoop": "_c_loop",
    "LetClause": "_let",
    "ParamExp": "_parameter",
    "BinaryTest": "_binary_test",
    "UnaryTest": "_unary_test",
    "ForClause": "_for",
    "DblQuoted": "_double_quoted",
    "CoprocClause": "_coproc",
    "TimeClause": "_time",
}
COPROC = "coproc: bash and the parser read its name, and what it runs, differently"


class _Reader:
    """One walk over shfmt's tree of a script, collecting what the Script holds."""

    def __init__(self, data: bytes, posix: bool = False) -> None:
        self.data = data
        self.posix = posix  # dash: POSIX sh, with no brace expansion
        self.commands: list[SimpleCommand] = []
        self.values: list[tuple[str, str | None]] = []
        self.evaluated: list[Evaluated] = []
        self.hazards: list[Hazard] = []
        self.redirects: list[Node] = []
        self.stdin: dict[int, tuple[Word | None, bool]] = {}  # by id() of a statement's command
        self.associative: set[str] = set()  # arrays declared -A: their keys are text
        self.arrays: set[str] = set()  # names given arrays: (...) or declare -a/-A
        self.unquoted_arrays: list[tuple[str, str]] = []  # declare a="$v": the name, the text
        self.timed: set[int] = set()  # id() of a command after ``time --``: bash skips the --
        self._evaluate(
            "bash's integer variables", Reading(names=set(INTEGER_VARIABLES)), arith.ASSIGNED
        )

    def script(self) -> Script:
        for node in nodes(syntax_tree(self.data, "posix" if self.posix else "bash")):
            self._comments(node)
            misread = misreadings.problem(node, self.data)
            if misread:
                raise ShellSyntaxError(misread)
            if isinstance(node.get("Redirs"), list):  # a statement, seen before its command
                self.redirects += node["Redirs"]  # (``>f`` alone is a statement with no command)
            if isinstance(node.get("Cmd"), dict):
                self.stdin[id(node["Cmd"])] = redirects_.stdin(node.get("Redirs") or [], self.data)
            read = _READERS.get(str(node.get("Type")))
            if read is not None:
                getattr(self, read)(node)
        self.hazards += [
            Hazard(text, COMPOUND) for n, text in self.unquoted_arrays if n in self.arrays
        ]
        found, opened = redirects_.writes(self.redirects, self.data)
        return Script(
            tuple(self.commands),
            tuple(found),
            frozenset(opened),
            tuple(redirects_.connections(self.redirects, self.data)),
            tuple(self.values),
            tuple(e for e in self.evaluated if e.array is None or e.array not in self.associative),
            tuple(self.hazards),
        )

    def source(self, node: Node) -> str:
        return source(node, self.data)

    def _call(self, node: Node) -> None:
        for assignment in node.get("Assigns") or []:
            self._assign(assignment)
        first = (node.get("Args") or [{}])[0].get("Parts") or []
        lead = first[0].get("Value", "") if first and first[0].get("Type") == "Lit" else ""
        if not self.posix and ASSIGNMENT.match(lead):
            # shfmt reads it as the command's name (after coproc); bash, as an assignment
            # (dash reads ``A+=1`` as a name, as shfmt does).
            raise ShellSyntaxError(f"{lead!r}... is an assignment, not a name")
        braces = not self.posix
        args = (node.get("Args") or [])[1 if id(node) in self.timed else 0 :]
        found = tuple(w for arg in args for w in words(arg, self.data, braces))
        if found:
            stdin, from_file = self.stdin.get(id(node), (None, False))
            self.commands.append(SimpleCommand(found, self.source(node), stdin, from_file))

    def _declaration(self, node: Node) -> None:
        variant = node["Variant"]["Value"]
        shown: list[Word] = [Word(variant, variant)]
        flags, declared = "", set[str]()
        for arg in node.get("Args") or []:
            if arg.get("Naked"):
                name = (arg.get("Name") or {}).get("Value", "")
                value = word(arg["Value"], self.data) if arg.get("Value") else Word(name, name)
                if value.literal and value.pattern.startswith(("-", "+")):
                    flags += value.pattern[1:]
                else:
                    self._named(value, f"{variant} {value.shown}")
                    named, equals, text = value.pattern.partition("=")
                    declared.add(named)
                    if equals:
                        self.values.append((named, text if value.literal else None))
                        if variant != "export":
                            self._compound(named, Word(text, text), value.shown)
                shown.append(value)
                continue
            name, given = self._assign(arg)
            declared.add(name)
            source = self.source(arg)
            if given is not None and variant != "export":
                self._compound(name, given, source)
            if given is None or arg.get("Value") is None:
                shown.append(Word(source, source, expands=given is None))
            else:
                sign = "+=" if arg.get("Append") else "="
                pattern, text = name + sign + given.pattern, name + sign + given.shown
                shown.append(Word(pattern, text, given.expands, given.splits))
        if "n" in flags and variant in NAMEREF_DECLARING:
            self.hazards.append(Hazard(self.source(node), NAMEREF))
        if "A" in flags:
            self.associative |= declared
        if "a" in flags or "A" in flags:
            self.arrays |= declared
        if "i" in flags:  # what an integer variable is given is evaluated as arithmetic
            self._evaluate(self.source(node), Reading(names=declared))
        self.commands.append(SimpleCommand(tuple(shown), self.source(node), declaration=True))

    def _compound(self, name: str, value: Word, source: str) -> None:
        """``declare a='(...)'``: bash reads a quoted value in parentheses, given to an array,
        as its elements, and expands them again. Refused as written, and where a value only
        known at run time may be one, for an array."""
        ends = (value.pattern[:1], value.pattern[-1:])
        if value.literal and ends == ("(", ")"):
            self.hazards.append(Hazard(source, COMPOUND))
        elif ends[0] in ("(", DYNAMIC) and ends[1] in (")", DYNAMIC) and not value.literal:
            self.unquoted_arrays.append((name, source))

    def _named(self, value: Word, where: str) -> None:
        """A word bash takes as a variable's name (``NAME``, ``NAME=VALUE``, ``a[i]``)."""
        reading = Reading()
        if not value.literal:
            reading.opaque.append(value.shown)
        else:
            arith.name_reading(value.pattern.partition("=")[0], reading)
        self._evaluate(where, reading)

    def _assign(self, node: Node) -> tuple[str, Word | None]:
        """``NAME=VALUE`` (leading, alone, or given to export/declare): the name and its value
        (None for an array)."""
        name = (node.get("Name") or {}).get("Value", "")
        source = self.source(node)
        self._arithmetic(node.get("Index"), source, array=name)
        if node.get("Array") is None:
            value = node.get("Value")
            if value is None:
                self.values.append((name, ""))
                return name, Word("", "")
            self._value(name, value)
            return name, word(value, self.data)
        self.arrays.add(name)
        for element in node["Array"].get("Elems") or []:
            self._arithmetic(element.get("Index"), source, array=name)
            if element.get("Value") is not None:
                self._value(name, element["Value"])
        return name, None

    def _value(self, name: str, node: Node) -> None:
        """A text ``name`` is given: known when literal; a number from ``$((...))``, ``$?``,
        ``$#``, ``$$`` or ``$!`` (quoted or not)."""
        parts = node.get("Parts") or []
        if len(parts) == 1 and parts[0]["Type"] == "DblQuoted":
            parts = parts[0].get("Parts") or []
        if len(parts) == 1 and (parts[0]["Type"] == "ArithmExp" or arith.numeric(parts[0])):
            self.values.append((name, "0"))
            return
        value = word(node, self.data)
        self.values.append((name, value.pattern if value.literal else None))

    def _evaluate(self, where: str, reading: Reading, how: str = "arithmetic") -> None:
        if reading.names or reading.opaque:
            self.evaluated.append(Evaluated(where, reading, how))
        self.values += [(name, "0") for name in reading.assigned]

    def _arithmetic(self, node: Node | None, where: str, array: str | None = None) -> None:
        if node is None or arith.whole_array(node):
            return
        reading = Reading()
        arith.expression(node, reading, self.source)
        if reading.names or reading.opaque:
            self.evaluated.append(Evaluated(where, reading, array=array))
        self.values += [(name, "0") for name in reading.assigned]

    def _arithmetic_command(self, node: Node) -> None:
        self._arithmetic(node.get("X"), self.source(node))

    def _c_loop(self, node: Node) -> None:
        for key in ("Init", "Cond", "Post"):
            self._arithmetic(node.get(key), self.source(node))

    def _let(self, node: Node) -> None:
        source = self.source(node)
        for expression in node.get("Exprs") or []:
            self._arithmetic(expression, source)
        shown = [Word("let", "let")] + [_opaque(self.source(e)) for e in node.get("Exprs") or []]
        self.commands.append(SimpleCommand(tuple(shown), source, declaration=True))

    def _parameter(self, node: Node) -> None:
        source = self.source(node)
        name = (node.get("Param") or {}).get("Value", "")
        # ${m[$k]} (not m[$k] inside arithmetic, where bash expands the key twice)
        self._arithmetic(node.get("Index"), source, array=None if node.get("Short") else name)
        for key in ("Offset", "Length"):
            self._arithmetic((node.get("Slice") or {}).get(key), source)
        expansion = node.get("Exp") or {}
        operator = expansion.get("Op")
        # ${!x}: x's value is a name; ${x@P}: x's value is expanded as a prompt. Of $1, $@ or
        # another parameter the command does not assign by name, the value is not known.
        reading = Reading(names={name}) if name.isidentifier() else Reading(opaque=[source])
        if node.get("Excl") and not node.get("Names") and not arith.whole_array(node.get("Index")):
            self._evaluate(source, reading, "name")
        if operator == "@" and word(expansion.get("Word") or {}, self.data).pattern == "P":
            self._evaluate(source, reading, "prompt")
        if operator in (":=", "=") and expansion.get("Word") is not None:
            self._value(name, expansion["Word"])

    def _binary_test(self, node: Node) -> None:
        if node.get("Op") in ARITHMETIC_TESTS:
            reading = Reading()
            for side in (node.get("X"), node.get("Y")):
                if side and side.get("Type") == "Word":
                    arith.word(side, reading, self.source)
            self._evaluate(self.source(node), reading)

    def _unary_test(self, node: Node) -> None:
        operand = node.get("X") or {}
        if node.get("Op") == "-v" and operand.get("Type") == "Word":
            self._named(word(operand, self.data), self.source(node))

    def _for(self, node: Node) -> None:
        loop = node.get("Loop") or {}
        if loop.get("Type") != "WordIter":
            return
        name = (loop.get("Name") or {}).get("Value", "")
        items = loop.get("Items")
        if not items:
            self.values.append((name, None))  # "$@"
        for item in items or []:
            for value in words(item, self.data, braces=not self.posix):
                self.values.append((name, value.pattern if value.literal else None))

    def _time(self, node: Node) -> None:
        """``time -- cmd``: bash's ``time`` skips an unquoted ``--`` (shfmt keeps it, as the
        command's name)."""
        command = (node.get("Stmt") or {}).get("Cmd") or {}
        first = (command.get("Args") or [{}])[0].get("Parts") or []
        dashes = len(first) == 1 and first[0].get("Type") == "Lit" and first[0]["Value"] == "--"
        if command.get("Type") == "CallExpr" and dashes:
            self.timed.add(id(command))

    def _coproc(self, node: Node) -> None:
        """Not followed: shfmt names a coproc before a simple command (``coproc curl x | wc``,
        where bash runs ``curl x``), and bash itself runs ``COPROC`` as a command for a coproc
        inside ``$(...)`` (it prints the command and reads it again)."""
        self.hazards.append(Hazard(self.source(node), COPROC))

    def _double_quoted(self, node: Node) -> None:
        for inner in nodes(node.get("Parts") or [], stop="CmdSubst"):
            # Bash keeps these quotes as text, and expands what they hold; shfmt does not.
            if inner.get("Type") == "SglQuoted" and set(inner.get("Value", "")) & set('$`\\"}'):
                reason = "single quotes inside a double-quoted ${...}: bash and the parser differ"
                self.hazards.append(Hazard(self.source(node), reason))
                return

    def _comments(self, node: Node) -> None:
        for comment in (node.get("Comments") or []) + (node.get("Last") or []):
            text = comment.get("Text", "")
            if "\n" in text or text.endswith("\\"):
                reason = "a comment ending in a backslash: bash ends it at the line's end"
                self.hazards.append(Hazard("#" + text.split("\n", 1)[0], reason))


def _opaque(text: str) -> Word:
    return Word(text, text, expands=True)
