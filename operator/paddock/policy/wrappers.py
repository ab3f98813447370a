"""Commands that run other commands: what ``timeout 5 curl x`` or ``bash -c 'curl x'`` really
runs, so that the policy judges that too.

A wrapper's options are read from a table of the options each one has. An option not in the
table might take a value, and then the command it runs is not the word after it: such a
command cannot be told, and the engine denies it rather than guess."""

from __future__ import annotations

from dataclasses import dataclass, field

from paddock.policy import git
from paddock.policy.outcomes import Runs, Shell, Unknown
from paddock.policy.shells import read_shell, script, script_file, trap, unknown_option
from paddock.policy.words import DYNAMIC, Word
from paddock.policy.wrapper_options import (
    APPLETS,
    FIND_EXEC,
    FIND_WRITES,
    JUDGED_ITSELF,
    PROGRAM_DIRECTORIES,
    READ_AS,
    REPLACED,
    SHELLS,
    WRAPPERS,
    Wrapper,
)


def judged_itself(name: Word) -> bool:
    """Whether a command is judged as itself besides what it runs: find, and a program that
    is not where the wrappers' own programs are (``./nohup`` is a file of the workspace, and
    runs whatever it holds)."""
    path = name.pattern
    if path.rsplit("/", 1)[-1] in JUDGED_ITSELF:
        return True
    return "/" in path and not path.startswith(PROGRAM_DIRECTORIES)


def runs(
    words: tuple[Word, ...],
    stdin: Word | None = None,
    stdin_file: bool = False,
    shell: Shell = Shell.BASH,
) -> list[Runs | Unknown] | None:
    """What the command of these words runs besides itself, or None when it runs nothing else
    (a plain command, or a wrapper with nothing to run). ``words[0]`` is a literal name;
    ``stdin`` the here-document it is fed, if any (a shell runs it as a script), and
    ``stdin_file`` whether its stdin is a file; ``shell`` the shell running it (for eval)."""
    name = words[0].pattern.rsplit("/", 1)[-1]
    args = words[1:]
    if name == "busybox" and args and args[0].pattern in SHELLS:
        return [Unknown(f"busybox {args[0].shown}: Paddock reads only bash's and dash's language")]
    if name in SHELLS:
        if name not in READ_AS:
            return [Unknown(f"{name}: Paddock reads only bash's and dash's language")]
        return read_shell(name, args, stdin, stdin_file)
    if name == "eval":
        args = args[1:] if args and args[0].pattern == "--" else args
        return [script(args, "eval", shell)] if args else None
    if name == "trap":
        return trap(args, shell)
    if name in ("source", "."):
        args = args[1:] if args and args[0].pattern == "--" else args
        return script_file(name, args[0]) if args else None
    if name in APPLETS and args and not args[0].pattern.startswith("-"):
        return [Runs(words=args)]  # busybox wget: the applet is the command
    if name == "git":
        return git.configs(args)
    if name.startswith(git.DASHED):  # git-push: git push
        return git.subcommand_runs((Word(name[4:], name[4:]), *args)) or None
    if name == "find":
        return _find(args) or None
    wrapper = WRAPPERS.get(name)
    if wrapper is None:
        return None
    if name == "script":  # it writes its typescript too
        return [_typescript(wrapper, args), *(_permuting(name, wrapper, args, stdin) or [])]
    if wrapper.permutes:
        return _permuting(name, wrapper, args, stdin)
    return _wrapped(name, wrapper, args, stdin, stdin_file)


def _typescript(wrapper: Wrapper, args: tuple[Word, ...]) -> Runs:
    """The files ``script`` writes: its logs (``-O FILE``...) and its first operand (options
    read anywhere, as getopt permutes them), else ``typescript``."""
    valued = wrapper.values | wrapper.script_options
    written: list[str] = []
    operands: list[str] = []
    index = 0
    while index < len(args):
        text, index = args[index].pattern, index + 1
        if text == "--":
            operands += [word.shown for word in args[index:]]
            break
        if not text.startswith("-") or text == "-":
            operands.append(args[index - 1].shown)
            continue
        option, equals, value = text.partition("=") if text.startswith("--") else ("", "", "")
        for position in range(1, len(text)) if not text.startswith("--") else ():
            if f"-{text[position]}" in valued:
                option, value = f"-{text[position]}", text[position + 1 :]
                break
        if option in valued and not (equals or value) and index < len(args):
            value, index = args[index].shown, index + 1
        if option in wrapper.outputs:
            written.append(value)
    return Runs(writes=(*written, operands[0] if operands else "typescript"))


def _find(args: tuple[Word, ...]) -> list[Runs | Unknown]:
    """find's -exec commands, each ``{}`` in them a file name only known at run time."""
    if any(not word.single for word in args):
        return [Unknown("find is given words that may become several at run time")]
    found: list[Runs | Unknown] = []
    index = 0
    while index < len(args):
        if args[index].pattern in FIND_EXEC:
            end = index + 1
            while end < len(args) and args[end].pattern not in (";", "+"):
                end += 1
            if end > index + 1:
                place = "" if args[index].pattern.endswith("dir") else None  # each file's
                found.append(Runs(_replaced(args[index + 1 : end], REPLACED), directory=place))
            index = end
        elif args[index].pattern in FIND_WRITES and index + 1 < len(args):
            found.append(Runs(writes=(args[index + 1].shown,)))
        index += 1
    return found


def _replaced(words: tuple[Word, ...], marker: str) -> tuple[Word, ...]:
    """The words with each ``marker`` made text only known at run time."""
    return tuple(
        Word(w.pattern.replace(marker, DYNAMIC), w.shown, w.expands, w.splits) for w in words
    )


@dataclass
class _Options:
    index: int  # of the first word after the options (the first operand, or after --)
    given: dict[str, str] = field(default_factory=dict)  # option -> value ("" for a flag)
    operands: list[int] = field(default_factory=list)  # operands among options (permuting)


def _options(
    name: str, wrapper: Wrapper, args: tuple[Word, ...]
) -> _Options | list[Runs | Unknown] | None:
    """A wrapper's options as its option parser reads them; what it runs when an option
    says (su -c); None when an option makes it run nothing."""
    parsed = _Options(0)
    while parsed.index < len(args):
        word = args[parsed.index]
        if not word.literal:
            return unknown_option(name, word)
        text = word.pattern
        if text == "--":
            parsed.index += 1
            break
        if not text.startswith("-") or (text == "-" and "-" not in wrapper.flags):
            if not wrapper.permutes:
                break
            parsed.operands.append(parsed.index)
            parsed.index += 1
            continue
        if text == "-" or (wrapper.numbers and text[1:].isdigit()):
            parsed.index += 1
            continue
        outcome = _long(name, wrapper, args, parsed) if text.startswith("--") else None
        if not text.startswith("--"):
            outcome = _short(name, wrapper, args, parsed)
        if outcome is not None:
            return outcome or None
    return parsed


def _next_value(
    name: str, option: str, args: tuple[Word, ...], parsed: _Options
) -> list[Runs | Unknown] | None:
    """An option's value in the next word: taken, or what cannot be told when that word is
    missing or may become several."""
    index = parsed.index + 1
    if index >= len(args) or not args[index].single:
        return [Unknown(f"{name} {option} is given no single value")]
    parsed.given[option] = args[index].pattern
    parsed.index += 2
    return None


def _script_option(
    name: str,
    wrapper: Wrapper,
    option: str,
    attached: str,
    args: tuple[Word, ...],
    parsed: _Options,
) -> list[Runs | Unknown]:
    """``su -c CMD``, ``-cCMD``, ``--command=CMD``: the shell text it runs. Given twice, the
    last runs (getopt): not told."""
    rest = (Word(attached, attached),) if attached else args[parsed.index + 1 :]
    later = args[parsed.index + (1 if attached else 2) :]
    if any(_script_option_in(wrapper, word) for word in later):
        return [Unknown(f"{name} may be given the command it runs more than once")]
    return [_option_script(name, option, rest)]


def _script_option_in(wrapper: Wrapper, word: Word) -> bool:
    """Whether the word gives a command (``-c``, ``-lc``, ``--command=...``), or may."""
    text = word.pattern
    if not word.literal or text.startswith("--"):
        return not word.literal or text.partition("=")[0] in wrapper.script_options
    return text.startswith("-") and any(
        f"-{letter}" in wrapper.script_options for letter in text[1:]
    )


def _long(
    name: str, wrapper: Wrapper, args: tuple[Word, ...], parsed: _Options
) -> list[Runs | Unknown] | None:
    """One ``--option[=value]``; what runs when it decides, else None (read on)."""
    text = args[parsed.index].pattern
    option, has_value, value = text.partition("=")
    if option in wrapper.no_command:
        return []
    if option in wrapper.script_options:
        return _script_option(name, wrapper, option, value, args, parsed)
    if option in wrapper.values and not has_value:
        return _next_value(name, option, args, parsed)
    if (
        option in wrapper.values
        or option in wrapper.optional
        or wrapper.long_values
        or (option in wrapper.flags and not has_value)
    ):
        parsed.given[option] = value
        parsed.index += 1
        return None
    return [Unknown(f"{name} has an option Paddock does not know: {text}")]


def _short(
    name: str, wrapper: Wrapper, args: tuple[Word, ...], parsed: _Options
) -> list[Runs | Unknown] | None:
    """One ``-abc`` cluster: flags, perhaps ending in an option that takes the rest of the
    cluster (or the next word) as its value."""
    text = args[parsed.index].pattern
    for position in range(1, len(text)):
        option, rest = "-" + text[position], text[position + 1 :]
        if option in wrapper.no_command:
            return []
        if option in wrapper.script_options:
            return _script_option(name, wrapper, option, rest, args, parsed)
        if option in wrapper.values and not rest:
            return _next_value(name, option, args, parsed)
        if option in wrapper.values or option in wrapper.optional:
            parsed.given[option] = rest
            break
        if option not in wrapper.flags:
            return [Unknown(f"{name} has an option Paddock does not know: {text}")]
        parsed.given[option] = ""
    parsed.index += 1
    return None


def _wrapped(
    name: str, wrapper: Wrapper, args: tuple[Word, ...], stdin: Word | None, stdin_file: bool
) -> list[Runs | Unknown] | None:
    leading = args[: wrapper.leading]
    if len(leading) < wrapper.leading or any(not word.single for word in leading):
        return [Unknown(f"{name} is not given a single word before its options")]
    args = args[wrapper.leading :]
    parsed = _options(name, wrapper, args)
    if not isinstance(parsed, _Options):
        return parsed
    index, given = parsed.index, parsed.given
    loads = [option for option in wrapper.loads if option in given] + ["a root"] * (
        name == "chroot"
    )
    if loads:
        return [Unknown(f"{name} {loads[0]}: what it runs is another program, or loads code")]
    if sum(option in given for option in ("-I", "-i", "--replace")) > 1:
        return [Unknown(f"{name} is given its replace string more than once: the last one is")]
    for _ in range(wrapper.operands):
        if index < len(args) and not args[index].single:
            return [Unknown(f"{name} is given a word that may become several: {args[index].shown}")]
        index += 1
    if name == "flock" and index < len(args) and args[index].pattern in ("-c", "--command"):
        return [_option_script(name, args[index].pattern, args[index + 1 :])]
    environment: list[tuple[str, str | None]] = []
    while wrapper.assignments and index < len(args) and "=" in args[index].pattern:
        variable, _, value = args[index].pattern.partition("=")
        if not args[index].single or DYNAMIC in variable:
            return [Unknown(f"{name} sets a variable only known at run time: {args[index].shown}")]
        environment.append((variable, None if DYNAMIC in value else value))
        index += 1
    extra: list[Runs | Unknown] = []
    output = given.get("-o", "")
    if name == "strace" and output.startswith(("|", "!")):
        extra.append(Runs(script=output[1:], shell=Shell.DASH))  # piped to sh -c CMD
    elif files := [given[o].replace(DYNAMIC, "*") for o in wrapper.outputs if o in given]:
        extra.append(Runs(writes=tuple(files)))  # (a value only known at run time: any file)
    if name == "flock" and parsed.index < len(args) and not args[parsed.index].pattern.isdigit():
        extra.append(Runs(writes=(args[parsed.index].shown,)))  # it creates its lock file
    if index >= len(args):
        if wrapper.bare_shell or any(option in given for option in wrapper.shell_options):
            return [Unknown(f"{name} with no command runs a shell that reads stdin")]
        return extra or ([Runs(environment=tuple(environment))] if environment else None)
    command = args[index:]
    if name == "watch" and "-x" not in given and "--exec" not in given:
        return [*extra, script(command, "watch", Shell.DASH)]  # handed to sh -c
    replace = next((given[o] or REPLACED for o in ("-I", "-i", "--replace") if o in given), None)
    if replace is not None:
        command = _replaced(command, replace)
    more = wrapper.more_arguments and replace is None
    place = next((given[o] for o in wrapper.directories if o in given), None)
    environment_ = tuple(environment)
    ran = Runs(command, None, more, stdin, stdin_file, environment_, directory=place)
    return [*extra, ran]


def _permuting(
    name: str, wrapper: Wrapper, args: tuple[Word, ...], stdin: Word | None
) -> list[Runs | Unknown] | None:
    """su, runuser and script read options anywhere: ``su USER -c CMD`` runs CMD. Without
    -c, ``runuser -u USER CMD`` runs CMD, ``su USER ARGS`` hands ARGS to a shell, and
    otherwise a shell reads its commands from stdin. ``-s SHELL`` names the program run as
    the shell: it is judged as a command too."""
    shells = [script((args[i + 1],), f"{name} -s") for i, w in enumerate(args[:-1])
              if w.pattern in ("-s", "--shell")]  # fmt: skip
    shells += [script((Word(w.pattern[8:], w.shown[8:]),), f"{name} --shell")
               for w in args if w.pattern.startswith("--shell=")]  # fmt: skip
    found = _permuted(name, wrapper, args, stdin)
    return [*shells, *(found or [])] if shells else found


def _permuted(
    name: str, wrapper: Wrapper, args: tuple[Word, ...], stdin: Word | None
) -> list[Runs | Unknown] | None:
    parsed = _options(name, wrapper, args)
    if not isinstance(parsed, _Options):
        return parsed
    rest = tuple(args[i] for i in parsed.operands) + args[parsed.index :]
    if name == "runuser" and ("-u" in parsed.given or "--user" in parsed.given) and rest:
        return [Runs(words=rest)]
    if rest and rest[0].pattern == "-":
        rest = rest[1:]
    if name == "script" or len(rest) < 2:
        return [Unknown(f"{name} runs a shell that reads its commands from stdin")]
    return read_shell(f"{name}'s shell", rest[1:], stdin, False)


def _option_script(name: str, option: str, rest: tuple[Word, ...]) -> Runs | Unknown:
    """``su -c CMD``, ``flock -c CMD``, ``script -c CMD``: run by a user's shell, ``$SHELL``
    or ``/bin/sh``, so read as either."""
    if not rest:
        return Unknown(f"{name} {option} is given no command")
    return script(rest[:1], f"{name} {option}", Shell.EITHER)
