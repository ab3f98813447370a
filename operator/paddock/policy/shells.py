"""The shells' own commands: ``bash -c TEXT`` (and ``sh -c``, read as dash), a here-document a
shell reads as its script, a script file, ``trap``'s action; and a script made of words."""

from __future__ import annotations

from paddock.policy.builtins import unmodelled_option
from paddock.policy.outcomes import Runs, Shell, Unknown
from paddock.policy.redirects import plain_file
from paddock.policy.words import Word
from paddock.policy.wrapper_options import (
    READ_AS,
    SHELL_LONG_FLAGS,
    SHELL_UNMODELLED,
    STARTUP_FILES,
)


def script(args: tuple[Word, ...], what: str, shell: Shell = Shell.BASH) -> Runs | Unknown:
    """Shell text made of words (eval joins them with spaces), read by ``shell``."""
    unknown = next((word for word in args if not word.literal), None)
    if unknown is not None:
        return Unknown(f"{what} runs text that is only known at run time: {unknown.shown}")
    return Runs(script=" ".join(word.pattern for word in args), shell=shell)


def unknown_option(name: str, word: Word) -> list[Runs | Unknown]:
    return [
        Unknown(
            f"{name} is given a word only known at run time where an option may be: {word.shown}"
        )
    ]


def read_shell(
    name: str, args: tuple[Word, ...], stdin: Word | None, stdin_file: bool
) -> list[Runs | Unknown] | None:
    """``bash -c TEXT``: TEXT is a script (``sh -c``'s read as dash reads it, or as either
    shell for the ``sh`` of su, whose user's shell may be either); so is a here-document a
    shell reads as its script. A shell that runs a file, or reads a file on stdin, is judged
    as the shell command itself; one that reads stdin from elsewhere (a pipe) runs what
    cannot be told."""
    shell = READ_AS.get(name, Shell.EITHER)
    index, command_mode, reads_stdin = 0, False, False
    while index < len(args):
        if not args[index].literal:
            return unknown_option(name, args[index])
        text = args[index].pattern
        if text == "-":  # the end of the options: the script is read from stdin
            reads_stdin = True
            index += 1
            break
        if text == "--" or not text.startswith(("-", "+")) or text == "+":
            break
        if text in STARTUP_FILES:
            return [Unknown(f"{name} {text} runs the code of a file")]
        if name == "bash" and f"-{text}" in STARTUP_FILES | SHELL_LONG_FLAGS:
            text = f"-{text}"  # bash reads -login as --login
        if text in STARTUP_FILES:
            return [Unknown(f"{name} {text} runs the code of a file")]
        if text in SHELL_UNMODELLED or (text[0] == "-" and text[1] != "-" and "i" in text):
            return [Unknown(f"{name} {text}: Paddock does not follow how it then reads")]
        if text.startswith("--"):
            if text not in SHELL_LONG_FLAGS:
                return [Unknown(f"{name} has an option Paddock does not know: {text}")]
            index += 1
            continue
        # A cluster of one-letter options (``-xc``, ``-co posix``): each o or O in it takes
        # the next word as its value, in turn; the command of -c is the first word after. An
        # option that changes how the shell reads its script is not followed.
        flags = text[1:]
        cluster = args[index : index + 1 + sum(flags.count(flag) for flag in "oO")]
        changed = unmodelled_option(cluster)
        if changed:
            return [Unknown(f"{name}: {changed.removeprefix('set ')} changes how it reads")]
        command_mode = command_mode or "c" in flags
        reads_stdin = reads_stdin or "s" in flags
        index += len(cluster)
    if index < len(args) and args[index].pattern == "--":
        index += 1
    if command_mode:
        if index >= len(args):
            return [Unknown(f"{name} -c is given no command")]
        return [script(args[index : index + 1], f"{name} -c", shell)]
    if index < len(args) and not reads_stdin:
        return script_file(name, args[index])
    if stdin_file:
        return None
    if stdin is None:
        return [Unknown(f"{name} reads its script from stdin, which is only known at run time")]
    return [script((stdin,), f"{name}'s here-document", shell)]


def script_file(name: str, path: Word) -> list[Runs | Unknown] | None:
    """A script file a shell or ``source`` runs: judged as the command itself when it is a
    file of its own (its content is not known either way), what cannot be told when it is
    stdin or a process substitution in disguise (``bash /dev/stdin``, ``source <(...)``)."""
    if plain_file(path):
        return None
    return [Unknown(f"{name} runs a script only known at run time: {path.shown}")]


def trap(args: tuple[Word, ...], shell: Shell) -> list[Runs | Unknown] | None:
    """``trap [-lp] [--] [ACTION] SIGNAL...``: ACTION runs later as ``eval`` would (judged
    with every value its variables get anywhere in the command). ``''`` ignores a signal, ``-``
    (and a lone operand) resets it; ``-l`` and ``-p`` only print."""
    if any(not word.single for word in args):
        return [Unknown("trap is given words only known at run time")]
    rest = list(args)
    while rest and rest[0].literal and rest[0].pattern.startswith("-") and rest[0].pattern != "-":
        option = rest.pop(0).pattern
        if option == "--":
            break
        if not set(option[1:]) <= {"l", "p"}:
            return [Unknown(f"trap is given an option Paddock does not read: {option}")]
        return None  # lists or prints traps: the rest are signals
    if len(rest) < 2 or (rest[0].literal and rest[0].pattern in ("-", "")):
        return None  # resets or ignores signals
    return [script(tuple(rest[:1]), "trap", shell)]
