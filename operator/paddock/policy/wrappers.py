"""Commands that run other commands: what ``timeout 5 curl x`` or ``bash -c 'curl x'`` really
runs, so that the policy judges that too.

A wrapper's options are read from a table of the options each one has. An option not in the
table might take a value, and then the command it runs is not the word after it: such a
command cannot be told, and the engine denies it rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paddock.policy.shell import DYNAMIC, Word


@dataclass(frozen=True)
class Runs:
    """A command run by another: ``words`` as arguments, or ``script`` as shell text."""

    words: tuple[Word, ...] = ()
    script: str | None = None
    more_arguments: bool = False  # xargs adds arguments read at run time
    stdin: Word | None = None  # the here-document the wrapped command reads


@dataclass(frozen=True)
class Unknown:
    """What the wrapper runs cannot be told from the text."""

    reason: str


@dataclass(frozen=True)
class Wrapper:
    """How one wrapper finds the command it runs among its arguments."""

    values: frozenset[str] = frozenset()  # options followed by a value
    flags: frozenset[str] = frozenset()  # options without one
    operands: int = 0  # words before the command (timeout's duration, chroot's directory)
    assignments: bool = False  # NAME=VALUE words before the command (env, sudo)
    script_options: frozenset[str] = frozenset()  # options whose value is shell text (su -c)
    more_arguments: bool = False
    numbers: bool = False  # -N is an option (nice -10)
    no_command: frozenset[str] = field(default_factory=frozenset)  # options that run nothing


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


WRAPPERS: dict[str, Wrapper] = {
    "env": Wrapper(
        values=_opts("-u --unset -C --chdir"),
        flags=_opts(
            "-i --ignore-environment -0 --null -v --debug - --default-signal --ignore-signal "
            "--block-signal --list-signal-handling"
        ),
        assignments=True,
    ),
    "timeout": Wrapper(
        values=_opts("-s --signal -k --kill-after"),
        flags=_opts("--preserve-status --foreground -v --verbose -f -p"),
        operands=1,
    ),
    "nohup": Wrapper(),
    "nice": Wrapper(values=_opts("-n --adjustment"), numbers=True),
    "ionice": Wrapper(values=_opts("-c --class -n --classdata"), flags=_opts("-t --ignore")),
    "stdbuf": Wrapper(values=_opts("-i -o -e --input --output --error")),
    "setsid": Wrapper(flags=_opts("-c --ctty -f --fork -w --wait")),
    "exec": Wrapper(values=_opts("-a"), flags=_opts("-c -l")),
    "command": Wrapper(flags=_opts("-p"), no_command=_opts("-v -V")),
    "builtin": Wrapper(),
    "time": Wrapper(
        values=_opts("-f --format -o --output"),
        flags=_opts("-a --append -p --portability -v --verbose -q --quiet"),
    ),
    "xargs": Wrapper(
        values=_opts(
            "-a --arg-file -d --delimiter -E --eof -I --replace -L --max-lines -n --max-args "
            "-P --max-procs -s --max-chars --process-slot-var"
        ),
        flags=_opts(
            "-0 --null -o --open-tty -p --interactive -r --no-run-if-empty -t --verbose -x "
            "--exit -e -i -l"
        ),
        more_arguments=True,
    ),
    "sudo": Wrapper(
        values=_opts(
            "-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role "
            "-t --type -T --command-timeout -U --other-user -R --chroot"
        ),
        flags=_opts(
            "-A --askpass -b --background -E --preserve-env -H --set-home -n --non-interactive "
            "-P --preserve-groups -S --stdin -s --shell -i --login -k --reset-timestamp"
        ),
        assignments=True,
        no_command=_opts("-l --list -v --validate -V --version -K --remove-timestamp"),
    ),
    "doas": Wrapper(values=_opts("-u -C"), flags=_opts("-n -s")),
    "chroot": Wrapper(values=_opts("--userspec --groups"), flags=_opts("--skip-chdir"), operands=1),
    "flock": Wrapper(
        values=_opts("-w --timeout -E --conflict-exit-code"),
        flags=_opts(
            "-s --shared -x -e --exclusive -u --unlock -n --nb --nonblock -o --close -F "
            "--no-fork --verbose"
        ),
        operands=1,
        script_options=_opts("-c --command"),
    ),
    "watch": Wrapper(
        values=_opts("-n --interval -q --equexit"),
        flags=_opts(
            "-b --beep -c --color -C --no-color -d --differences -e --errexit -g --chgexit "
            "-p --precise -t --no-title -w --no-wrap -x --exec"
        ),
    ),
    "strace": Wrapper(
        values=_opts("-o -e -s -u -E -a -b -I -O -S -X -P"),
        flags=_opts("-f -ff -c -C -d -D -F -i -k -q -qq -r -t -tt -ttt -T -v -w -x -xx -y -yy"),
    ),
    "ltrace": Wrapper(values=_opts("-o -e -s -u -a -n"), flags=_opts("-f -c -C -i -r -S -t -T")),
    "unbuffer": Wrapper(flags=_opts("-p")),
    "su": Wrapper(
        values=_opts("-s --shell -g --group -G --supp-group -w --whitelist-environment"),
        flags=_opts("- -l --login -m -p --preserve-environment -P --pty -f --fast"),
        script_options=_opts("-c --command --session-command"),
    ),
    "runuser": Wrapper(
        values=_opts("-u --user -s --shell -g --group -G --supp-group"),
        flags=_opts("- -l --login -m -p --preserve-environment"),
        script_options=_opts("-c --command --session-command"),
    ),
    "script": Wrapper(
        values=_opts("-E --echo -I --log-in -O --log-out -T --log-timing -B --log-io -m"),
        flags=_opts("-a --append -e --return -f --flush -q --quiet"),
        script_options=_opts("-c --command"),
    ),
}
# Wrappers whose remaining words are the command only with an option (su -c), or never.
SCRIPT_ONLY = frozenset({"su", "runuser", "script"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
_SHELL_VALUES = _opts("-o +o -O +O --rcfile --init-file")
_SHELL_LONG_FLAGS = _opts(
    "--norc --noprofile --login --posix --restricted --verbose --noediting --debugger "
    "--dump-strings --dump-po-strings --protected"
)
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# Commands judged as themselves as well as by what they run.
JUDGED_ITSELF = frozenset({"find"})


def runs(words: tuple[Word, ...], stdin: Word | None = None) -> list[Runs | Unknown] | None:
    """What the command of these words runs besides itself, or None when it runs nothing else
    (a plain command, or a wrapper with nothing to run). ``words[0]`` is a literal name;
    ``stdin`` the here-document it is fed, if any (a shell runs it as a script)."""
    name = words[0].pattern.rsplit("/", 1)[-1]
    args = words[1:]
    if name == "busybox" and args and args[0].pattern in SHELLS:
        name, args = args[0].pattern, args[1:]
    if name in SHELLS:
        return _shell(name, args, stdin)
    if name == "eval":
        return [_script(args, "eval")] if args else None
    if name == "trap":
        return _trap(args)
    if name == "find":
        return _find(args) or None
    wrapper = WRAPPERS.get(name)
    return None if wrapper is None else _wrapped(name, wrapper, args, stdin)


def _script(args: tuple[Word, ...], what: str) -> Runs | Unknown:
    """Shell text made of words (eval joins them with spaces, as bash does)."""
    if any(word.dynamic for word in args):
        return Unknown(f"{what} runs text that is only known at run time")
    return Runs(script=" ".join(word.pattern for word in args))


def _shell(name: str, args: tuple[Word, ...], stdin: Word | None) -> list[Runs | Unknown] | None:
    """``bash -c TEXT``: TEXT is a script; so is a here-document a shell reads as its script.
    A shell that runs a file, or stdin from a pipe, is judged as the shell command itself."""
    index, command_mode, reads_stdin = 0, False, False
    while index < len(args):
        text = args[index].pattern
        if text == "--" or not text.startswith(("-", "+")) or text in ("-", "+"):
            break
        if text in _SHELL_VALUES:
            index += 2
            continue
        if text.startswith("--"):
            if text not in _SHELL_LONG_FLAGS:
                return [Unknown(f"{name} has an option Paddock does not know: {text}")]
        elif "c" in text[1:]:
            command_mode = True
        elif "s" in text[1:]:
            reads_stdin = True
        elif any(flag in text[1:] for flag in "oO"):
            index += 2
            continue
        index += 1
    if index < len(args) and args[index].pattern == "--":
        index += 1
    if not command_mode:
        if stdin is None or (index < len(args) and not reads_stdin):
            return None
        if stdin.dynamic:
            return [Unknown(f"{name} reads a script that is only known at run time")]
        return [Runs(script=stdin.pattern)]
    if index >= len(args):
        return [Unknown(f"{name} -c is given no command")]
    return [_script(args[index : index + 1], f"{name} -c")]


def _trap(args: tuple[Word, ...]) -> list[Runs | Unknown] | None:
    if len(args) < 2 or args[0].pattern.startswith("-"):
        return None  # lists or resets traps
    return [_script(args[:1], "trap")]


def _find(args: tuple[Word, ...]) -> list[Runs | Unknown]:
    found: list[Runs | Unknown] = []
    index = 0
    while index < len(args):
        if args[index].pattern in FIND_EXEC:
            end = index + 1
            while end < len(args) and args[end].pattern not in (";", "+"):
                end += 1
            if end > index + 1:
                found.append(Runs(words=args[index + 1 : end]))
            index = end
        index += 1
    return found


def _wrapped(
    name: str, wrapper: Wrapper, args: tuple[Word, ...], stdin: Word | None
) -> list[Runs | Unknown] | None:
    index = 0
    while index < len(args):
        word = args[index]
        text = word.pattern
        if not word.literal and text.startswith("-"):
            return [Unknown(f"{name} is given an option only known at run time: {word.shown}")]
        if text == "--":
            index += 1
            break
        if not text.startswith("-") or (text == "-" and "-" not in wrapper.flags):
            break
        option, has_value, value = text.partition("=") if text.startswith("--") else (text, "", "")
        if option in wrapper.no_command:
            return None
        if option in wrapper.script_options:
            attached = (Word(value, word.shown.partition("=")[2]),)
            return [_option_script(name, option, attached if has_value else args[index + 1 :])]
        if option in wrapper.values:
            index += 1 if has_value else 2
        elif option in wrapper.flags or (wrapper.numbers and option[1:].isdigit()):
            index += 1
        elif consumed := _short_cluster(option, wrapper):
            index += consumed
        else:
            return [Unknown(f"{name} has an option Paddock does not know: {text}")]
    if name in SCRIPT_ONLY:
        return None
    index += wrapper.operands
    while wrapper.assignments and index < len(args) and _is_assignment(args[index]):
        index += 1
    if index >= len(args):
        return None
    command = args[index:]
    if name == "watch" and "-x" not in {w.pattern for w in args[:index]}:
        return [_script(command, "watch")]  # watch hands its words to sh -c
    return [Runs(words=command, more_arguments=wrapper.more_arguments, stdin=stdin)]


def _option_script(name: str, option: str, rest: tuple[Word, ...]) -> Runs | Unknown:
    if not rest:
        return Unknown(f"{name} {option} is given no command")
    return _script(rest[:1], f"{name} {option}")


def _short_cluster(option: str, wrapper: Wrapper) -> int:
    """How many words ``-abc`` (flags, perhaps ending in an option with a value) takes, or 0
    when a letter is unknown."""
    if option.startswith("--") or len(option) < 3:
        return 0
    for position, letter in enumerate(option[1:], start=1):
        short = "-" + letter
        if short in wrapper.values:
            return 1 if position < len(option) - 1 else 2
        if short not in wrapper.flags:
            return 0
    return 1


def _is_assignment(word: Word) -> bool:
    name, equals, _ = word.pattern.partition("=")
    return bool(equals) and name.isidentifier() and DYNAMIC not in name
