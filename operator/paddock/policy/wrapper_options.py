"""The options of each wrapper (a command that runs another), as its own option parser reads
them: which take a value, which run nothing, which hold a script."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Wrapper:
    """How one wrapper finds the command it runs among its arguments."""

    values: frozenset[str] = frozenset()  # options followed by a value
    flags: frozenset[str] = frozenset()  # options without one
    optional: frozenset[str] = frozenset()  # options whose value is attached, if any (-i[R])
    operands: int = 0  # words before the command (timeout's duration, chroot's directory)
    assignments: bool = False  # NAME=VALUE words before the command (env, sudo)
    script_options: frozenset[str] = frozenset()  # options whose value is shell text (su -c)
    more_arguments: bool = False
    numbers: bool = False  # -N is an option (nice -10)
    no_command: frozenset[str] = field(default_factory=frozenset)  # options that run nothing
    permutes: bool = False  # options may follow operands (getopt without "+": su, script)


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
            "-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s --max-chars "
            "--process-slot-var"
        ),
        flags=_opts(
            "-0 --null -o --open-tty -p --interactive -r --no-run-if-empty -t --verbose -x --exit"
        ),
        optional=_opts("-e --eof -i --replace -l --max-lines"),
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
        permutes=True,
    ),
    "runuser": Wrapper(
        values=_opts("-u --user -s --shell -g --group -G --supp-group"),
        flags=_opts("- -l --login -m -p --preserve-environment"),
        script_options=_opts("-c --command --session-command"),
        permutes=True,
    ),
    "script": Wrapper(
        values=_opts("-E --echo -I --log-in -O --log-out -T --log-timing -B --log-io -m"),
        flags=_opts("-a --append -e --return -f --flush -q --quiet"),
        script_options=_opts("-c --command"),
        permutes=True,
    ),
}
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
SHELL_VALUES = _opts("-o +o -O +O")
STARTUP_FILES = _opts("--rcfile --init-file")
SHELL_LONG_FLAGS = _opts(
    "--norc --noprofile --login --posix --restricted --verbose --noediting --debugger "
    "--dump-strings --dump-po-strings --protected"
)
