"""The options of each wrapper (a command that runs another), as its own option parser reads
them: which take a value, which run nothing, which hold a script."""

from __future__ import annotations

from dataclasses import dataclass, field

from paddock.policy.outcomes import Shell


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
    long_values: bool = False  # every --option is one word, its value after = (valgrind)
    leading: int = 0  # operands before the options (setarch ARCH [options] command)
    bare_shell: bool = False  # given no command, it runs a shell that reads stdin (chroot DIR)
    shell_options: frozenset[str] = frozenset()  # ... or when given one of these (sudo -s)
    outputs: frozenset[str] = frozenset()  # options whose value is a file it writes
    directories: frozenset[str] = frozenset()  # options whose value is where it runs it
    loads: frozenset[str] = frozenset()  # options that load or run another program (a root)


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
        directories=_opts("-C --chdir"),
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
        outputs=_opts("-o --output"),
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
        shell_options=_opts("-s --shell -i --login"),
        values=_opts(
            "-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role "
            "-t --type -T --command-timeout -U --other-user -R --chroot"
        ),
        flags=_opts(
            "-A --askpass -b --background -E --preserve-env -H --set-home -n --non-interactive "
            "-P --preserve-groups -S --stdin -s --shell -i --login -k --reset-timestamp"
        ),
        assignments=True,
        directories=_opts("-D --chdir"),
        no_command=_opts("-l --list -v --validate -V --version -K --remove-timestamp"),
    ),
    "doas": Wrapper(shell_options=_opts("-s"), values=_opts("-u -C"), flags=_opts("-n -s")),
    "chroot": Wrapper(
        bare_shell=True,
        values=_opts("--userspec --groups"),
        flags=_opts("--skip-chdir"),
        operands=1,
    ),
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
        outputs=_opts("-o"),
        loads=_opts("-E"),  # sets the environment of what it runs (LD_PRELOAD=...)
    ),
    "ltrace": Wrapper(
        values=_opts("-o -e -s -u -a -n"),
        flags=_opts("-f -c -C -i -r -S -t -T"),
        outputs=_opts("-o"),
    ),
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
        outputs=_opts("-I --log-in -O --log-out -T --log-timing -B --log-io"),
    ),
    # Programs that run a command in a changed process: scheduling, limits, namespaces, users.
    "taskset": Wrapper(
        flags=_opts("-a --all-tasks -c --cpu-list"), operands=1, no_command=_opts("-p --pid")
    ),
    "chrt": Wrapper(
        values=_opts("-T --sched-runtime -P --sched-period -D --sched-deadline"),
        flags=_opts(
            "-a --all-tasks -b --batch -d --deadline -e --ext -f --fifo -i --idle "
            "-o --other -r --rr -R --reset-on-fork -v --verbose"
        ),
        operands=1,
        no_command=_opts("-p --pid -m --max"),
    ),
    "numactl": Wrapper(
        values=_opts(
            "-C --physcpubind -N --cpunodebind -m --membind -p --preferred -i --interleave"
        ),
        flags=_opts("-l --localalloc"),
        no_command=_opts("-s --show -H --hardware"),
    ),
    "prlimit": Wrapper(
        optional=_opts(
            "-c --core -d --data -e --nice -f --fsize -i --sigpending -l --memlock "
            "-m --rss -n --nofile -q --msgqueue -r --rtprio -s --stack -t --cpu "
            "-u --nproc -v --as -x --locks -y --rttime"
        ),
        flags=_opts("--noheadings --raw --verbose"),
        values=_opts("-o --output"),
        no_command=_opts("-p --pid"),
    ),
    "unshare": Wrapper(
        bare_shell=True,
        values=_opts("-S --setuid -G --setgid -R --root -w --wd --propagation"),
        directories=_opts("-w --wd"),
        loads=_opts("-R --root"),
        optional=_opts(
            "-m --mount -u --uts -i --ipc -n --net -p --pid -U --user -C --cgroup -T --time"
        ),
        flags=_opts(
            "-f --fork -r --map-root-user -c --map-current-user --kill-child "
            "--mount-proc --keep-caps"
        ),
    ),
    "setpriv": Wrapper(
        values=_opts(
            "--reuid --regid --ruid --rgid --euid --egid --groups --inh-caps "
            "--ambient-caps --bounding-set --securebits --pdeathsig --selinux-label "
            "--apparmor-profile"
        ),
        flags=_opts("--clear-groups --keep-groups --init-groups --nnp --no-new-privs --reset-env"),
        no_command=_opts("-d --dump"),
    ),
    "fakeroot": Wrapper(
        bare_shell=True,
        values=_opts("-l --lib --faked -s -i"),
        flags=_opts("-u --unknown-is-real"),
        outputs=_opts("-s"),
        loads=_opts("-l --lib --faked"),
    ),
    "faketime": Wrapper(flags=_opts("-m -f"), values=_opts("-p --exclude-monotonic"), operands=1),
    "proxychains": Wrapper(values=_opts("-f"), flags=_opts("-q")),
    "proxychains4": Wrapper(values=_opts("-f"), flags=_opts("-q")),
    "torsocks": Wrapper(values=_opts("-u -p -a -P"), flags=_opts("-i -d -q")),
    "dbus-run-session": Wrapper(values=_opts("--config-file --dbus-daemon")),
    "gosu": Wrapper(operands=1),
    "su-exec": Wrapper(operands=1),
    "pkexec": Wrapper(
        bare_shell=True, values=_opts("--user"), flags=_opts("--disable-internal-agent --keep-cwd")
    ),
    "setarch": Wrapper(
        bare_shell=True,
        flags=_opts(
            "-v --verbose -R --addr-no-randomize -F --fdpic-funcptrs -Z --mmap-page-zero "
            "-L --addr-compat-layout -X --read-implies-exec -B --32bit -I --short-inode "
            "-S --whole-seconds -T --sticky-timeouts -3 --3gb --4gb --uname-2.6"
        ),
        leading=1,
    ),
    "valgrind": Wrapper(
        optional=frozenset(),
        long_values=True,
        outputs=_opts(
            "--log-file --xml-file --massif-out-file --callgrind-out-file --cachegrind-out-file "
            "--dhat-out-file"
        ),
    ),
}
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})  # FILE after each
# Commands judged as themselves as well as by what they run.
# (script writes its typescript: a rule allows it, as it would tee.)
JUDGED_ITSELF = frozenset({"find", "git", "source", ".", "script"})
# Where the wrappers' own programs are: a path elsewhere (./nohup) is a file of its own.
PROGRAM_DIRECTORIES = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")
REPLACED = "{}"  # what find -exec and xargs -i replace with a file name or an input line
APPLETS = frozenset({"busybox", "toybox"})  # multi-call programs: the first word is the command
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})
# The shells whose language the engine reads; the others' (zsh, ksh, mksh, busybox's ash)
# differ from both in ways it does not follow (zsh's glob qualifiers run code).
READ_AS = {"bash": Shell.BASH, "sh": Shell.DASH, "dash": Shell.DASH}
STARTUP_FILES = _opts("--rcfile --init-file")
SHELL_LONG_FLAGS = _opts(
    "--norc --noprofile --login --restricted --verbose --noediting --dump-strings "
    "--dump-po-strings --protected"
)
# Not followed: POSIX mode's reading, the debugger (it loads code of its own), an interactive
# shell (it expands aliases and history, and reads startup files).
SHELL_UNMODELLED = _opts("--posix --debugger --interactive -i")
