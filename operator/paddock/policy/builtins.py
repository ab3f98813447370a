"""Builtins that take text bash evaluates again or runs: a variable's name (``read NAME``,
``printf -v NAME``, ``test -v NAME``: a subscript in it is evaluated), arithmetic (``let``),
a command (``mapfile -C``, ``compgen -C``), or what a name runs (``hash -p``, ``enable -f``);
and those that change how the shell reads what follows (``set -k``, ``shopt -s
expand_aliases``, ``alias``, a nameref), which the engine does not follow."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from paddock.policy import arith
from paddock.policy.arith import Reading
from paddock.policy.outcomes import Runs, Unknown
from paddock.policy.words import Word

DECLARING = frozenset({"declare", "typeset", "local", "export", "readonly"})
# A nameref: every later assignment to it (``r=...``, ``read r``) goes to the variable it
# names, which may be pointed anywhere: the engine does not follow it.
NAMEREF = "a nameref (declare -n): what is assigned to it goes to a variable it names"
COMPOUND = "a declared value in parentheses: bash expands it again as an array's elements"
NAMEREF_DECLARING = frozenset({"declare", "typeset", "local"})  # export -n only unexports
# Per builtin: its options that take a value, and those whose value is a variable's name.
OPTIONS = {
    "read": ("adinNptu", "a"),
    "mapfile": ("dnOsuCc", ""),
    "readarray": ("dnOsuCc", ""),
    "printf": ("v", "v"),
    "wait": ("p", "p"),
    "compgen": ("AGWFCXPSo", ""),
    "complete": ("AGWFCXPSo", ""),
    "fc": ("e", ""),
}
# The variable a builtin sets when it is given no name.
DEFAULT_NAME = {"read": "REPLY", "mapfile": "MAPFILE", "readarray": "MAPFILE"}
NAMED_OPERANDS = frozenset({"read", "mapfile", "readarray", "unset"})  # their operands are names


@dataclass
class Effects:
    reading: Reading = field(default_factory=Reading)  # what bash evaluates, as arithmetic
    assigned: list[tuple[str, str | None]] = field(default_factory=list)  # None: not known
    runs: list[Runs | Unknown] = field(default_factory=list)


def effects(words: tuple[Word, ...]) -> Effects:
    """What the builtin of these words evaluates, assigns and runs besides itself."""
    found = Effects()
    name = words[0].pattern
    given, operands = _options(words[1:], OPTIONS.get(name, ("", ""))[0])
    for letter in OPTIONS.get(name, ("", ""))[1]:
        if letter in given:
            _name(given[letter], found)
    if name in NAMED_OPERANDS:
        for operand in operands:
            _name(operand, found, assigns=name != "unset")
    if name in DEFAULT_NAME and not operands and "a" not in given:
        found.assigned.append((DEFAULT_NAME[name], None))
    if name == "getopts" and len(operands) > 1:
        _name(operands[1], found)
        found.assigned.append(("OPTARG", None))
    if name in ("test", "[") or name in DECLARING:
        _named_words(name, words[1:], found)
    if name == "let":
        for word in words[1:]:
            if word.literal:
                arith.text_reading(word.pattern, found.reading)
            else:
                found.reading.opaque.append(word.shown)
    if "C" in given and name in ("mapfile", "readarray", "compgen", "complete"):
        found.runs.append(_text(given["C"], f"{name} -C"))
    if "W" in given and name in ("compgen", "complete"):  # each word of it is expanded
        wordlist = given["W"]
        found.runs.append(_text(Word(": " + wordlist.pattern, wordlist.shown), f"{name} -W"))
    if name == "alias" and any("=" in word.pattern or not word.literal for word in words[1:]):
        # bash expands aliases once expand_aliases is on, dash always: a name may become any
        # text, read again, and the engine does not follow it.
        found.runs.append(Unknown(f"{_shown(words)}: an alias changes what later commands are"))
    if name == "hash" and "p" in given:
        found.runs.append(Unknown("hash -p makes a name run another program"))
    if name == "fc" and "l" not in given:
        found.runs.append(Unknown("fc runs commands of the shell's history"))
    if name == "enable" and "f" in given:
        found.runs.append(Unknown("enable -f loads a builtin's code from a file"))
    if name == "set":
        changed = unmodelled_option(words[1:])
        if changed:
            found.runs.append(Unknown(f"{changed} changes how bash reads what follows"))
    if name == "shopt":
        changed = _shopt(words[1:])
        if changed:
            found.runs.append(Unknown(f"{changed} changes how bash reads what follows"))
    return found


def _shown(words: tuple[Word, ...]) -> str:
    return " ".join(word.shown for word in words)


# Options of ``set`` (and of a shell's command line) that change how bash reads or runs what
# follows in ways the engine does not follow: assignments anywhere in a command (-k), history
# expansion (-H), no brace expansion (+B), POSIX mode (``time -v cmd`` runs /usr/bin/time). Each
# is judged as running what cannot be told. (-a, exporting every assignment, is followed: each
# assignment of a variable that decides what runs is judged, exported or not.)
UNMODELLED = frozenset({"-k", "-H", "+B"})
UNMODELLED_NAMES = frozenset({"-o keyword", "-o histexpand", "+o braceexpand", "-o posix"})


# shopt options that change only what a glob matches, what is printed, history and job
# control, or that make the shell run less: the engine need not follow them (a glob is matched
# as a word that may become none). Any other (expand_aliases, extdebug, extquote,
# interactive_comments, cdable_vars, the compat levels, ...) changes how bash reads or runs
# what follows.
SHOPT_MODELLED = frozenset(
    {"assoc_expand_once", "autocd", "cdspell", "checkhash", "checkjobs", "checkwinsize",
     "cmdhist", "complete_fullquote", "direxpand", "dirspell", "dotglob", "execfail",
     "extglob", "failglob", "force_fignore", "globasciiranges", "globskipdots", "globstar",
     "gnu_errfmt", "histappend", "histreedit", "histverify", "hostcomplete", "huponexit",
     "inherit_errexit", "lastpipe", "lithist", "localvar_inherit", "localvar_unset",
     "login_shell", "mailwarn", "no_empty_cmd_completion", "nocaseglob", "nocasematch",
     "nullglob",
     "noexpand_translation", "patsub_replacement", "progcomp", "progcomp_alias", "promptvars",
     "restricted_shell", "shift_verbose", "sourcepath", "varredir_close", "xpg_echo"}
)  # fmt: skip


def _shopt(args: tuple[Word, ...]) -> str | None:
    """``shopt -s NAME`` (or -u, or -o NAME: set's names) that changes how bash reads what
    follows, as shown; None when none does (or shopt only prints)."""
    given, names = _options(args, "")
    if any(not word.literal for word in args):
        return f"shopt given {next(w.shown for w in args if not w.literal)}"
    sign = "-" if "s" in given else "+" if "u" in given else None
    if sign is None:
        return None
    for name in names:
        if "o" in given:
            if f"{sign}o {name.pattern}" in UNMODELLED_NAMES:
                return f"shopt -{'s' if sign == '-' else 'u'}o {name.shown}"
        elif name.pattern not in SHOPT_MODELLED:
            return f"shopt -{'s' if sign == '-' else 'u'} {name.shown}"
    return None


def unmodelled_option(args: tuple[Word, ...]) -> str | None:
    """The first option among ``set``'s arguments (``-k``, ``-euo keyword``, ``+B``; and a
    shell's ``-O NAME``, a shopt option) that changes how bash reads what follows, as
    ``set`` would take it; None when there is none. A word only known at run time where an
    option may be is one."""
    index = 0
    while index < len(args):
        word = args[index]
        if not word.literal:
            return f"set given {word.shown}"
        text = word.pattern
        if text in ("-", "--") or len(text) < 2 or not text.startswith(("-", "+")):
            return None
        index += 1
        for flag in text[1:]:
            if flag in "oO" and index < len(args):
                value = args[index]
                index += 1
                if not value.literal or (
                    f"{text[0]}o {value.pattern}" in UNMODELLED_NAMES
                    if flag == "o"
                    else value.pattern not in SHOPT_MODELLED
                ):
                    return f"set {text[0]}{flag} {value.shown}"
            elif text[0] + flag in UNMODELLED:
                return f"set {text[0]}{flag}"
    return None


def _options(args: tuple[Word, ...], valued: str) -> tuple[dict[str, Word], list[Word]]:
    """A builtin's options (``-rp PROMPT``, clustered or not) and its operands."""
    given: dict[str, Word] = {}
    index = 0
    while index < len(args):
        text = args[index].pattern
        if not args[index].literal or not text.startswith("-") or text == "-":
            break
        index += 1
        if text == "--":
            break
        for position, letter in enumerate(text[1:], start=1):
            if letter in valued:
                rest = text[position + 1 :]
                if rest:
                    given[letter] = Word(rest, rest)
                elif index < len(args):
                    given[letter] = args[index]
                    index += 1
                break
            given[letter] = Word("", "")
    return given, list(args[index:])


def _name(word: Word, found: Effects, assigns: bool = True) -> None:
    """A word bash takes as a variable's name (and, unless ``assigns`` is off, assigns
    text only known at run time)."""
    if not word.literal:
        found.reading.opaque.append(word.shown)
        return
    arith.name_reading(word.pattern, found.reading)
    if assigns:
        found.assigned.append((word.pattern.partition("[")[0], None))


def _named_words(name: str, args: tuple[Word, ...], found: Effects) -> None:
    """``test -v NAME``; ``declare NAME=VALUE`` reached through a wrapper (builtin, command)."""
    if name in ("test", "["):
        for flag, operand in itertools.pairwise(args):
            if flag.pattern == "-v":
                _name(operand, found, assigns=False)
        return
    flags = "".join(w.pattern[1:] for w in args if w.literal and w.pattern.startswith(("-", "+")))
    for word in args:
        if word.literal and word.pattern.startswith(("-", "+")):
            continue
        variable, equals, value = word.pattern.partition("=")
        if not word.literal:
            found.reading.opaque.append(word.shown)
            continue
        arith.name_reading(variable, found.reading)
        if "i" in flags:  # every value an integer variable is given is evaluated
            found.reading.names.add(variable.partition("[")[0])
        if equals:
            found.assigned.append((variable.partition("[")[0], value))
            if name != "export" and value.startswith("(") and value.endswith(")"):
                found.runs.append(Unknown(COMPOUND))
    if "n" in flags and name in NAMEREF_DECLARING:
        found.runs.append(Unknown(NAMEREF))


def _text(word: Word, what: str) -> Runs | Unknown:
    if not word.literal:
        return Unknown(f"{what} runs text that is only known at run time: {word.shown}")
    return Runs(script=word.pattern)
