"""Text bash evaluates again: an arithmetic expression reads variables, and a variable's
value is itself evaluated as an expression, where a subscript runs its expansions
(``x='a[$(curl x)]'; (( x ))`` runs curl). So does a name given to ``read``, ``printf -v``
or ``test -v``, the value behind ``${!x}``, and the value behind ``${x@P}``.

Here, the pieces of shfmt's syntax tree that bash evaluates as arithmetic are read into the
variables they read and the parts whose text cannot be told; the engine decides with what
the command assigns to those variables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Node = dict[str, Any]

# Parameters whose value is a number whatever happens: $# $? $$ $!
NUMERIC_PARAMETERS = frozenset("#?$!")
ASSIGNING = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|="})
_NUMBER = re.compile(r"\b[0-9][0-9A-Za-z_@#]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSAFE_TEXT = frozenset("[$`\\'\"")


@dataclass
class Reading:
    """What evaluating some arithmetic reads."""

    names: set[str] = field(default_factory=set)  # variables whose values are evaluated
    assigned: set[str] = field(default_factory=set)  # variables given a number
    opaque: list[str] = field(default_factory=list)  # parts whose text cannot be told


def text_reading(text: str, reading: Reading) -> None:
    """Literal text evaluated as arithmetic (a quoted expression, a variable's value): the
    names it reads; a subscript, expansion or quote in it is opaque."""
    if any(char in _UNSAFE_TEXT for char in text):
        reading.opaque.append(text)
        return
    reading.names.update(_NAME.findall(_NUMBER.sub(" ", text)))


def expression(node: Node | None, reading: Reading, source: Any) -> None:
    """An arithmetic expression of shfmt's tree. ``source(node)`` is a node's text."""
    stack: list[Node | None] = [node]
    while stack:
        item = stack.pop()
        if not item:
            continue
        kind = item.get("Type")
        if kind == "BinaryArithm":
            if item.get("Op") in ASSIGNING:
                reading.assigned.update(_target(item.get("X")))
            stack += [item.get("X"), item.get("Y")]
        elif kind in ("UnaryArithm", "ParenArithm"):
            if item.get("Op") in ("++", "--"):
                reading.assigned.update(_target(item.get("X")))
            stack.append(item.get("X"))
        elif kind == "Word":
            word(item, reading, source)


def word(node: Node, reading: Reading, source: Any) -> None:
    """A word evaluated as arithmetic (an operand of ``(( ))``, ``[[ x -eq y ]]``)."""
    for part in node.get("Parts") or []:
        kind = part["Type"]
        if kind == "Lit" or (kind == "SglQuoted" and not part.get("Dollar")):
            text_reading(part.get("Value", ""), reading)
        elif kind == "DblQuoted":
            for inner in part.get("Parts") or []:
                if inner["Type"] == "Lit":
                    text_reading(inner.get("Value", ""), reading)
                else:
                    _expansion(inner, reading, source)
        else:
            _expansion(part, reading, source)


def _expansion(part: Node, reading: Reading, source: Any) -> None:
    """An expansion inside arithmetic: its value becomes part of the expression."""
    if part["Type"] == "ArithmExp":
        return  # a number; the expression inside is judged on its own
    if part["Type"] == "ParamExp":
        name = (part.get("Param") or {}).get("Value", "")
        plain = not any(part.get(key) for key in ("Excl", "Exp", "Repl", "Slice", "Names"))
        if part.get("Length") or (plain and name in NUMERIC_PARAMETERS):
            return
        if plain and _NAME.fullmatch(name):
            reading.names.add(name)  # an element's value (a[1]) is the array's
            return
        if _with_default(part, name):  # ${x:-0}: x's value, or the default as written
            reading.names.add(name)
            default = part["Exp"]["Word"]["Parts"][0]
            text_reading(default.get("Value", ""), reading)
            return
    reading.opaque.append(source(part))


def _with_default(part: Node, name: str) -> bool:
    """``${x:-TEXT}`` (or ``-``, ``:=``, ``=``) with TEXT a plain literal."""
    expansion = part.get("Exp") or {}
    parts = (expansion.get("Word") or {}).get("Parts") or []
    others = any(part.get(key) for key in ("Excl", "Repl", "Slice", "Names", "Index", "Length"))
    return (
        bool(_NAME.fullmatch(name))
        and not others
        and expansion.get("Op") in (":-", "-", ":=", "=")
        and len(parts) == 1
        and parts[0]["Type"] == "Lit"
    )


def _target(node: Node | None) -> set[str]:
    parts = (node or {}).get("Parts") or []
    if len(parts) == 1 and parts[0]["Type"] == "Lit":
        return {parts[0].get("Value", "")}
    if len(parts) == 1 and parts[0]["Type"] == "ParamExp":
        return {(parts[0].get("Param") or {}).get("Value", "")}
    return set()


def name_reading(text: str, reading: Reading) -> None:
    """A name bash is given as text (``read NAME``, ``test -v NAME``, the value behind
    ``${!x}``): a plain name reads nothing; a subscript is evaluated as arithmetic."""
    name, bracket, rest = text.partition("[")
    if not _NAME.fullmatch(name) or (bracket and not rest.endswith("]")):
        reading.opaque.append(text)
    elif bracket:
        text_reading(rest[:-1], reading)


# Variables the shell sets from what ran before (the last argument, a line read, a match, the
# directory): their text is the command's own doing, so never known.
SHELL_SET = frozenset(
    {"_", "REPLY", "MAPFILE", "BASH_REMATCH", "BASH_COMMAND", "BASH_ARGV", "BASH_ARGV0",
     "BASH_EXECUTION_STRING", "BASH_SOURCE", "FUNCNAME", "OPTARG", "COPROC", "PWD", "OLDPWD",
     "DIRSTACK", "READLINE_LINE", "COMP_LINE", "COMP_WORDS", "HISTCMD"}
)  # fmt: skip
PROMPT_SPECIAL = frozenset("$`\\")
# How bash's own integer variables are read: what the command assigns them is evaluated as
# arithmetic (what the shell holds there is a number).
ASSIGNED = "an integer variable's assignment"


def unsafe(
    how: str,
    reading: Reading,
    values: dict[str, list[str | None]],
    memo: dict[tuple[str, str], str | None] | None = None,
) -> str | None:
    """Why evaluating what ``reading`` read may run a command, or None when it cannot.
    ``values``: every text each variable may hold (None: one not known); a variable the
    command never assigns holds what the sandbox's environment gave it. ``memo`` keeps what
    is found per variable across calls with the same values."""
    if reading.opaque:
        return f"{how} of text only known at run time: {reading.opaque[0]}"
    memo = {} if memo is None else memo
    for name in sorted(reading.names):
        if (name, how) not in memo:
            memo[name, how] = _variable(name, how, values, set(), memo)
        if memo[name, how]:
            return memo[name, how]
    return None


def _variable(
    name: str,
    how: str,
    values: dict[str, list[str | None]],
    seen: set[str],
    memo: dict[tuple[str, str], str | None],
) -> str | None:
    if name in seen:
        return None
    seen.add(name)
    if name in SHELL_SET and how != ASSIGNED:
        return f"{how} of ${name}, which the shell sets from what ran before"
    for value in values.get(name, []):
        if value is None:
            return f"{how} of ${name}, which is given text only known at run time"
        if how == "prompt":
            if set(value) & PROMPT_SPECIAL:
                return f"prompt expansion of ${name} runs what its value holds"
            continue
        reading = Reading()
        (name_reading if how == "name" else text_reading)(value, reading)
        if reading.opaque:
            return f"{how} of ${name}, whose value {value!r} holds a subscript or expansion"
        for inner in sorted(reading.names):
            found = memo.get((inner, "arithmetic"), "")  # "" : not judged yet
            problem = _variable(inner, "arithmetic", values, seen, memo) if found == "" else found
            if problem:
                return problem
    return None


def numeric(part: Node) -> bool:
    """``$?``, ``$#``, ``$$``, ``$!``: a number, whatever ran."""
    name = (part.get("Param") or {}).get("Value")
    return part["Type"] == "ParamExp" and bool(part.get("Short")) and name in ("?", "#", "$", "!")


def whole_array(index: Node | None) -> bool:
    """``[@]`` and ``[*]``: every element, nothing evaluated."""
    parts = (index or {}).get("Parts") or []
    return len(parts) == 1 and parts[0].get("Value") in ("@", "*")
