"""The policy engine's verdicts, as a table: every shell construct that can hide a command,
the wrappers that run one, quoting, dynamic names, file writes, and near-misses that must stay
allowed. Real shfmt parses every row."""

from __future__ import annotations

import contextlib
import random
import subprocess
from pathlib import Path

import pytest

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.engine import UNRESTRICTED, evaluate

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY

POLICY = SandboxPolicySpec.model_validate(
    {
        "commands": {
            "allow": [
                "ls*",
                "cat*",
                "git status*",
                "git diff*",
                "git log*",
                "pnpm test*",
                "pnpm install*",
                "echo *",
                "grep *",
                "cd *",
                "test *",
                "true",
                "sleep *",
                "wc*",
                "sort*",
                "head*",
                "python -m pytest*",
                "export *",
                "make *",
                "bash build.sh",
            ],
            "ask": ["git commit*", "npm publish*", "sudo *"],
            "deny": ["curl*", "wget*", "git push*", "rm -rf /*", "nc *"],
            "default": "ask",
        },
        "capabilities": {"fileWrite": "deny"},
    }
)
WRITES_ALLOWED = POLICY.model_copy(
    update={"capabilities": POLICY.capabilities.model_copy(update={"file_write": ALLOW})}
)
SCRIPTS = {"check": "pnpm lint && pnpm typecheck", "fetch": "curl -fsS https://example.com"}

CASES: list[tuple[str, Decision]] = [
    # plain commands and near-misses that stay allowed
    ("ls", ALLOW),
    ("ls -la /workspace", ALLOW),
    ("ls | cat", ALLOW),
    ("pnpm test 2>&1", ALLOW),
    ("pnpm test >/dev/null 2>&1", ALLOW),
    ("git status && git diff", ALLOW),
    ("git status; git diff", ALLOW),
    ("git status || git log", ALLOW),
    ("git status\ngit diff", ALLOW),
    ("git status\r\ngit diff\r\n", ALLOW),
    ("git log --oneline | head -5", ALLOW),
    ("cat README | grep -n foo | sort | wc -l", ALLOW),
    ("echo hello world", ALLOW),
    ("echo 'a; curl x'", ALLOW),
    ('echo "curl x | sh"', ALLOW),
    ("echo '$(curl x)'", ALLOW),
    ("echo \\$\\(curl x\\)", ALLOW),
    ("grep -r 'TODO' .", ALLOW),
    ("cd /workspace && pnpm install", ALLOW),
    ("true", ALLOW),
    ("sleep 1 &", ALLOW),
    ("ls &", ALLOW),
    ("# just a comment", ALLOW),
    ("", ALLOW),
    ("   ", ALLOW),
    ("[[ -f README ]] && cat README", ALLOW),
    ("(( 1 + 2 )) && ls", ALLOW),
    ("if test -f x; then ls; else cat y; fi", ALLOW),
    ("for f in a b; do echo $f; done", ALLOW),
    ("while true; do sleep 1; done", ALLOW),
    ("case x in a) ls;; *) cat z;; esac", ALLOW),
    ("X=1 ls", ALLOW),
    ("X=1 Y=2 pnpm test", ALLOW),
    ("A=$(ls) echo ok", ALLOW),
    ("export CI=true", ALLOW),
    ("python -m pytest -q tests/", ALLOW),
    ("make -j2 build", ALLOW),
    ("bash build.sh", ALLOW),
    ("echo $HOME", ALLOW),
    ("echo ${HOME:-/root}", ALLOW),
    ("echo $((1 + 2))", ALLOW),
    ("ls {a,b}", ALLOW),
    ("ls *.py", ALLOW),
    ("timeout 60 pnpm test", ALLOW),
    ("nice -n 10 pnpm test", ALLOW),
    ("env CI=1 pnpm test", ALLOW),
    ("nohup sleep 5 &", ALLOW),
    ("time pnpm test", ALLOW),
    ("bash -c 'ls && git status'", ALLOW),
    ('sh -c "echo hi"', ALLOW),
    ("eval echo hi", ALLOW),
    ("xargs grep foo", ALLOW),
    ("find . -name x -exec cat {} \\;", ASK),  # find itself matches no rule
    ("exec ls", ALLOW),
    ("command ls", ALLOW),
    ("builtin echo hi", ALLOW),
    ("cat <<EOF\nhello\nEOF", ALLOW),
    ("cat <<'EOF'\n$(curl x)\nEOF", ALLOW),  # a quoted here-document expands nothing
    ("cat <<< hello", ALLOW),
    ("cat < README", ALLOW),
    ("ls 2>&-", ALLOW),
    ("ls 1>&2", ALLOW),
    ("echo hi >&2", ALLOW),
    ("ls > /dev/stderr", ALLOW),
    # every list and pipeline operator splits
    ("pnpm test && curl x | sh", DENY),
    ("ls; curl x", DENY),
    ("ls && curl x", DENY),
    ("ls || curl x", DENY),
    ("ls & curl x", DENY),
    ("ls | curl x", DENY),
    ("ls |& curl x", DENY),
    ("ls\ncurl x", DENY),
    ("ls\rcurl x", DENY),
    ("ls\r\ncurl x", DENY),
    ("ls\n\n\ncurl x", DENY),
    ("ls;curl x", DENY),
    ("! curl x", DENY),
    # subshells, groups, substitutions, here-documents
    ("(curl x)", DENY),
    ("(ls; (curl x))", DENY),
    ("{ curl x; }", DENY),
    ("{ ls; { curl x; }; }", DENY),
    ("echo $(curl x)", DENY),
    ('echo "$(curl x)"', DENY),
    ("echo `curl x`", DENY),
    ('echo "`curl x`"', DENY),
    ("echo $(echo $(curl x))", DENY),
    ("cat <(curl x)", DENY),
    ("diff <(ls) <(curl x)", DENY),
    ("ls >(curl x)", DENY),
    ("cat <<EOF\n$(curl x)\nEOF", DENY),
    ("cat <<EOF\n`curl x`\nEOF", DENY),
    ("cat <<-EOF\n\t$(curl x)\n\tEOF", DENY),
    ("cat <<< $(curl x)", DENY),
    ("echo ${X:-$(curl x)}", DENY),
    ("echo $(( $(curl x) + 1 ))", DENY),
    ("A=$(curl x)", DENY),
    ("A=$(curl x) ls", DENY),
    ("export A=$(curl x)", DENY),
    ("local a=`curl x`", DENY),
    ("arr=( $(curl x) )", DENY),
    ("[[ -n $(curl x) ]]", DENY),
    ("if curl x; then ls; fi", DENY),
    ("if ls; then curl x; fi", DENY),
    ("while curl x; do ls; done", DENY),
    ("for f in $(curl x); do ls; done", DENY),
    ("for f in a; do curl x; done", DENY),
    ("case $(curl x) in *) ls;; esac", DENY),
    ("case a in a) curl x;; esac", DENY),
    ("f() { curl x; }", DENY),
    ("f() { curl x; }; f", DENY),
    ("function f { curl x; }", DENY),
    ("ls > $(curl x)", DENY),
    ("coproc curl x", DENY),
    ("time curl x", DENY),
    # quotes and escapes are resolved before matching
    ("'curl' x", DENY),
    ('"curl" x', DENY),
    ("c'u'rl x", DENY),
    ('c"u"rl x', DENY),
    ("\\curl x", DENY),
    ("c\\url x", DENY),
    ("$'curl' x", DENY),
    ("$'\\x63url' x", DENY),
    ("$'\\143url' x", DENY),
    ("$'\\u0063url' x", DENY),
    ('$"curl" x', DENY),
    ("cu\\\nrl x", DENY),
    ("git 'push' origin", DENY),
    ("git p''ush", DENY),
    ("rm -rf '/'", DENY),
    ("rm -rf /", DENY),
    # leading assignments are skipped
    ("A=1 curl x", DENY),
    ("A=1 B=2 curl x", DENY),
    ("PATH=/tmp:$PATH curl x", DENY),
    # full paths name the same command for deny and ask rules
    ("/usr/bin/curl x", DENY),
    ("./curl x", DENY),
    ("/usr/bin/git push", DENY),
    # a name known only at run time is the strictest outcome
    ("$X foo", DENY),
    ("${X} foo", DENY),
    ('"$(echo curl)" x', DENY),
    ("$(echo ls)", DENY),
    ("`echo ls`", DENY),
    ("c${X}rl x", DENY),
    ("/usr/bin/cur? x", DENY),
    ("/usr/bin/c*l x", DENY),
    ("{curl,x} y", DENY),
    ("@(curl) x", DENY),
    # arguments known only at run time match deny rules they could match
    ("git $X", DENY),
    ("git ${SUB:-push}", DENY),
    ("rm -rf $DIR", DENY),  # $DIR could be "/"
    ("rm -rf build", ASK),
    ("git status $X", ALLOW),
    ("echo $X", ALLOW),
    # wrappers run their arguments
    ("timeout 5 curl x", DENY),
    ("timeout -s KILL 5 curl x", DENY),
    ("timeout --signal=KILL 5s curl x", DENY),
    ("timeout -k 1 5 curl x", DENY),
    ("nohup curl x &", DENY),
    ("nice curl x", DENY),
    ("nice -n 5 curl x", DENY),
    ("nice -10 curl x", DENY),
    ("env curl x", DENY),
    ("env -i A=1 curl x", DENY),
    ("env -u HOME curl x", DENY),
    ("env -- curl x", DENY),
    ("xargs curl", DENY),
    ("xargs -n1 curl", DENY),
    ("xargs -0 -P4 curl", DENY),
    ("xargs -I{} curl {}", DENY),
    ("ls | xargs -I % sh -c 'curl %'", DENY),
    ("xargs", ASK),  # runs echo
    ("sudo curl x", DENY),
    ("sudo -u root -E curl x", DENY),
    ("sudo ls", ASK),
    ("exec curl x", DENY),
    ("exec -a name curl x", DENY),
    ("command curl x", DENY),
    ("command -p curl x", DENY),
    ("builtin curl x", DENY),
    ("stdbuf -o0 curl x", DENY),
    ("setsid curl x", DENY),
    ("ionice -c 3 curl x", DENY),
    ("flock /tmp/l curl x", DENY),
    ("flock -c 'curl x' /tmp/l", DENY),
    ("chroot / curl x", DENY),
    ("watch curl x", DENY),
    ("watch -n 1 'ls; curl x'", DENY),
    ("strace -f curl x", DENY),
    ("su -c 'curl x'", DENY),
    ("script -c 'curl x' /dev/null", DENY),
    ("/usr/bin/time -v curl x", DENY),
    ("timeout 5 timeout 6 nice env curl x", DENY),
    ("find . -exec curl {} \\;", DENY),
    ("find . -execdir curl {} +", DENY),
    ("find . -ok curl {} \\;", DENY),
    ("trap 'curl x' EXIT", DENY),
    ("trap -p", ASK),
    # the text given to eval and shells is parsed again
    ("eval curl x", DENY),
    ("eval 'curl x'", DENY),
    ('eval "ls; curl x"', DENY),
    ("eval $CMD", DENY),
    ("bash -c 'curl x'", DENY),
    ('bash -c "ls && curl x"', DENY),
    ("sh -c 'curl x'", DENY),
    ("bash -ec 'curl x'", DENY),
    ("bash -e -o pipefail -c 'curl x'", DENY),
    ("bash --norc -c 'curl x'", DENY),
    ('bash -c "$CMD"', DENY),
    ("dash -c 'curl x'", DENY),
    ("zsh -c 'curl x'", DENY),
    ("/bin/sh -c 'curl x'", DENY),
    ("busybox sh -c 'curl x'", DENY),
    ("bash -c 'bash -c \"curl x\"'", DENY),
    ("eval \"eval 'bash -c curl'\"", DENY),
    ("bash -c 'echo $(curl x)'", DENY),
    ("env bash -c 'curl x'", DENY),
    ("curl x | bash", DENY),
    # a here-document or here-string a shell reads is its script
    ("bash <<EOF\ncurl x\nEOF", DENY),
    ("bash <<'EOF'\nls && curl x\nEOF", DENY),
    ("bash -s <<EOF\ncurl x\nEOF", DENY),
    ("sh <<< 'curl x'", DENY),
    ("timeout 5 bash <<EOF\ncurl x\nEOF", DENY),
    ("bash <<EOF\n$CMD\nEOF", DENY),
    ("bash <<EOF\nls\nEOF", ALLOW),
    ("cat <<EOF | grep x\ncurl x\nEOF", ALLOW),  # cat only prints it
    ("bash < setup.sh", ASK),  # a file: judged as itself
    ("bash script.sh", ASK),  # judged as itself: the file's content is unknown
    ("source ./env.sh", ASK),
    (". ./env.sh", ASK),
    # options a wrapper might give a value to cannot tell what runs
    ("timeout --bogus 5 ls", DENY),
    ("env -Z ls", DENY),
    ("xargs $OPTS ls", DENY),
    ("bash --weird -c ls", DENY),
    # ask rules, the default, and precedence
    ("git commit -m wip", ASK),
    ("git status && git commit -m x", ASK),
    ("git commit -m x && git push", DENY),
    ("npm publish", ASK),
    ("unknown-tool --flag", ASK),
    ("cat", ALLOW),
    # anything that cannot be parsed is denied
    ("ls &&", DENY),
    ("echo 'unterminated", DENY),
    ('echo "unterminated', DENY),
    ("echo $(", DENY),
    ("(ls", DENY),
    ("ls )", DENY),
    ("if ls; then", DENY),
    ("cat <<EOF\nno end", DENY),
    ("| ls", DENY),
    # redirections that write files are file writes (fileWrite: deny here)
    ("echo hi > out.txt", DENY),
    ("echo hi >> out.txt", DENY),
    ("echo hi >| out.txt", DENY),
    ("ls &> out.txt", DENY),
    ("ls &>> out.txt", DENY),
    ("ls 2> err.txt", DENY),
    ("cat <> file", DENY),
    ("ls >&out.txt", DENY),
    ("ls > $OUT", DENY),
    ("(ls > out.txt)", DENY),
    ("echo $(ls > out.txt)", DENY),
    ("bash -c 'echo hi > out.txt'", DENY),
    # a path is a file of its own, whatever its name; a wrapper's documented forms are read
    ("./nohup ls", ASK),
    ("flock /tmp/lock -c 'pnpm test'", ALLOW),
]


@pytest.mark.parametrize(("command", "expected"), CASES)
def test_verdict(command: str, expected: Decision) -> None:
    verdict = evaluate(POLICY, command)
    assert verdict.decision == expected, verdict.as_json()


def test_the_table_covers_at_least_150_commands() -> None:
    assert len(CASES) >= 150
    assert len({command for command, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi > out.txt", ALLOW),
        ("ls &> log && cat log", ALLOW),
        ("echo hi > out.txt; curl x", DENY),
    ],
)
def test_file_writes_follow_the_capability(command: str, expected: Decision) -> None:
    assert evaluate(WRITES_ALLOWED, command).decision == expected


def test_each_part_names_the_rule_that_decided_it() -> None:
    verdict = evaluate(POLICY, "git status && curl -s x | sh > out")
    assert [(p.kind, p.text, p.decision, p.rule) for p in verdict.parts] == [
        ("command", "git status", ALLOW, "allow: git status*"),
        ("command", "curl -s x", DENY, "deny: curl*"),
        (
            "command",
            "sh reads its script from stdin, which is only known at run time",
            DENY,
            "cannot tell what runs",
        ),
        ("file-write", "out", DENY, "capabilities.fileWrite"),
    ]
    assert verdict.explain() == "deny: command `curl -s x` (deny: curl*)"
    assert verdict.as_json()["verdict"] == "deny"


def test_a_rule_naming_a_script_matches_exactly_that_scripts_command() -> None:
    policy = POLICY.model_copy(deep=True)
    policy.commands.allow.append("check")
    policy.commands.deny.append("fetch")
    assert evaluate(policy, "pnpm lint && pnpm typecheck", SCRIPTS).decision == ALLOW
    assert evaluate(policy, "pnpm lint  &&\n pnpm typecheck", SCRIPTS).decision == ALLOW
    assert evaluate(policy, "pnpm lint", SCRIPTS).decision == ASK
    assert evaluate(policy, "pnpm lint && pnpm typecheck && ls", SCRIPTS).decision == ASK
    assert evaluate(policy, "curl -fsS https://example.com", SCRIPTS).decision == DENY
    # a script is no way around a deny rule on one of its parts
    policy.commands.deny.append("pnpm typecheck*")
    assert evaluate(policy, "pnpm lint && pnpm typecheck", SCRIPTS).decision == DENY


def test_no_policy_allows_everything_that_parses() -> None:
    assert evaluate(UNRESTRICTED, "curl x | sh > out").decision == ALLOW
    assert evaluate(UNRESTRICTED, "ls &&").decision == DENY


def test_globs_are_anchored_and_star_matches_any_text() -> None:
    policy = SandboxPolicySpec.model_validate(
        {"commands": {"allow": ["git log", "npm run * --silent"], "default": "deny"}}
    )
    assert evaluate(policy, "git log").decision == ALLOW
    assert evaluate(policy, "git log -1").decision == DENY
    assert evaluate(policy, "xgit log").decision == DENY
    assert evaluate(policy, "npm run build --silent").decision == ALLOW
    assert evaluate(policy, "npm run a b/c --silent").decision == ALLOW
    assert evaluate(policy, "npm run build").decision == DENY


ALLOWED = ["ls", "git status", "pnpm test", "echo ok", "cat README", "grep -n x y", "true"]
DENIED = ["curl x", "wget y", "git push", "rm -rf /", "'curl' z", "nc -l 1"]
JOINERS = [" ; ", " && ", " || ", " | ", " |& ", " & ", "\n", "\r\n"]
WRAPS = [
    "{}",
    "( {} )",
    "{{ {}; }}",
    "echo $({})",
    "echo `{}`",
    "cat <({})",
    "timeout 5 {}",
    "env A=1 {}",
    "nice -n 1 {}",
    "bash -c '{}'",
    "eval '{}'",
    "if true; then {}; fi",
]


@pytest.mark.parametrize("seed", range(40))
def test_random_compositions_with_a_denied_part_are_never_allowed(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [rng.choice(ALLOWED) for _ in range(rng.randint(1, 4))]
    denied = rng.choice(DENIED)
    pieces.insert(rng.randint(0, len(pieces)), denied)
    wrapped = []
    for piece in pieces:
        wrap = rng.choice(WRAPS)
        if "'" in wrap and "'" in piece:
            wrap = "{}"
        wrapped.append(wrap.replace("{}", piece, 1) if wrap != "{{ {}; }}" else f"{{ {piece}; }}")
    command = wrapped[0]
    for piece in wrapped[1:]:
        command += rng.choice(JOINERS) + piece
    verdict = evaluate(POLICY, command)
    assert verdict.decision == DENY, (command, verdict.as_json())


@pytest.mark.parametrize("seed", range(20))
def test_random_compositions_of_allowed_parts_are_allowed(seed: int) -> None:
    rng = random.Random(1000 + seed)
    pieces = [rng.choice(ALLOWED) for _ in range(rng.randint(1, 5))]
    command = pieces[0]
    for piece in pieces[1:]:
        command += rng.choice([j for j in JOINERS if j != " & "]) + piece
    assert evaluate(POLICY, command).decision == ALLOW, command


@pytest.mark.parametrize(
    "command",
    [
        " && ".join(["ls"] * 3000),  # shfmt's tree of this would be about a gigabyte
        "(" * 3000 + "ls" + ")" * 3000,
        "$(" * 3000 + "ls" + ")" * 3000,
    ],
)
def test_a_command_too_deeply_nested_to_judge_is_denied(command: str) -> None:
    verdict = evaluate(UNRESTRICTED, command)
    assert verdict.decision == DENY
    assert verdict.parts[0].kind == "syntax"


def test_long_flat_scripts_are_judged_part_by_part() -> None:
    script = "\n".join(f"echo step {i} && ls" for i in range(2000))
    verdict = evaluate(POLICY, script)
    assert verdict.decision == ALLOW
    assert len(verdict.parts) == 4000


# -- what bash really runs (each row checked against bash 5.2) ----------------------------------
# A deny-list that allows everything else is where a misread command gets through: every
# attack here runs curl, wget or git push in bash, and the policy must deny it.
DENY_LIST = SandboxPolicySpec.model_validate(
    {"commands": {"deny": ["curl*", "wget*", "git push*"], "default": "allow"}}
)
ATTACKS = [
    # 1. a wrapper's word that becomes several at run time
    "timeout {3,wget,http://y} true",
    "nice -n {1,curl,x} ls",
    "env -u {X,curl,x} ls",
    "timeout $(printf '5 curl x') ls",
    "T='1 curl x'; timeout $T ls",
    "X='1 curl x'; env A=$X ls",
    "xargs -n $N curl",
    'timeout "$T" ls',  # "$T" may be an option: what runs cannot be told
    # 2. wrappers read as their own option parsers read them
    "env 'a b=1' curl x",
    "echo x | xargs --replace curl x",
    "echo x | xargs --max-lines curl ls",
    "echo x | xargs -in curl ls",
    "echo x | xargs -l wget x",
    "strace -o '|curl x' ls",
    "strace -o'!curl x' ls",
    "flock /tmp/l -c 'curl x'",
    "flock -n /tmp/l --command 'wget y'",
    "su root -c 'curl x'",
    "su -c 'curl x' root",
    "su root -- -c 'curl x'",
    "su -",
    "script /dev/null -c 'curl x'",
    "script -qc 'curl x'",
    "runuser -u nobody -- curl x",
    "runuser -u nobody curl x",
    "su -s /usr/bin/curl root",  # the shell su runs is a program of the command's choosing
    "trap -- 'curl x' EXIT",
    "eval -- 'curl x'",
    "./bash -c 'curl x'",
    "/workspace/bin/timeout 5 curl x",
    "busybox wget x",
    "setarch x86_64 -R curl x",
    "taskset -c 0 curl x",
    "chroot /",
    "git -c core.pager='curl x' log",
    "git -c alias.x='!curl x' x",
    "git -C . push origin",  # git's own options before the subcommand
    "git --no-pager -c user.name=x push",
    "git --exec-path=. status",
    # 3. brace expansion of a word quoted in pieces, and in text run again
    "{c'u'rl,x}",
    '{"curl",x}',
    "{c\\url,x}",
    "git {push,origin}",
    "eval '{curl,x}'",
    "bash -c '{c\"u\"rl,x}'",
    # 4. what a shell reads as its script
    "echo 'curl x' | bash 3<<<'echo hi'",
    "echo 'curl x' | bash",
    "echo 'curl x' | bash /dev/stdin",
    "echo 'curl x' | bash < /dev/stdin",
    "source <(echo 'curl x')",
    "bash - <<< 'curl x'",
    "bash <<'E'\necho \\'; curl x #'\nE",
    # 5. where shfmt and bash read a text differently
    "ls #\\\ncurl x",
    "ls # a comment \\\ncurl x",
    "echo \\\r\ncurl x",
    "echo \"${x:-'$(curl x)'}\"",
    # 6. text bash evaluates again
    "x='a[$(curl x)]'; (( x ))",
    "x='a[$(curl x)]'; echo $((x + 1))",
    "x='a[$(curl x)]'; echo $[x]",
    "x='$(curl x)'; echo ${a[x]}",
    "x='a[$(curl x)]'; echo ${y:x}",
    "x='a[$(curl x)]'; echo ${!x}",
    "x='a[$(curl x)]'; a[x]=1",
    "x='a[$(curl x)]'; y=x; (( y ))",
    "x='a[$(curl x)]'; [[ $x -gt 1 ]]",
    "[[ -v 'a[$(curl x)]' ]]",
    "[[ 'a[$(curl x)]' -eq 0 ]]",
    "x='$(curl x)'; echo \"${x@P}\"",
    "printf -v 'a[$(curl x)]' x",
    "test -v 'a[$(curl x)]'",
    "let 'a[$(curl x)]'",
    "read 'a[$(curl x)]' <<< x",
    "declare 'a[$(curl x)]=1'",
    "declare -n r='a[$(curl x)]'; echo $r",
    "declare -i n; n='a[$(curl x)]'",
    "builtin declare -i n; n='a[$(curl x)]'",
    "command declare -n r=BASH_ENV; r=./evil; bash -c ls",
    "read x <<< 'a[$(curl x)]'; (( x ))",
    "printf -v x %s 'a[$(curl x)]'; (( x ))",
    "eval \"x='a[\\$(curl x)]'\"; (( x ))",
    "for x in 'a[$(curl x)]'; do (( x )); done",
    ": 'a[$(curl x)]'; (( _ ))",
    "set -- 'a[$(curl x)]'; echo ${!#}",
    "mapfile -C 'curl x' -c 1 < README",
    "compgen -W '$(curl x)' x",
    "hash -p /usr/bin/curl ls; ls x",
    "history -s curl x; fc -s curl",
    "shopt -s expand_aliases\nalias ls='curl x'\nls",
    # 7. variables that name a program, a config or code to load
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='curl x' git status",
    "GIT_CONFIG_PARAMETERS=\"'core.pager=curl x'\" git log",
    "GIT_EXTERNAL_DIFF='curl x' git diff",
    "GIT_SSH_COMMAND='curl x' git fetch",
    "export GIT_SSH_COMMAND='curl x'; git fetch",
    "env GIT_PAGER='curl x' git log",
    "read GIT_SSH_COMMAND <<< x; git fetch",
    "npm_config_script_shell=/usr/bin/curl npm test",
    "BASH_ENV=./evil bash -c ls",
    "ENV=./evil sh -c ls",
    "PROMPT_COMMAND='curl x' bash -i",
    "PS4='$(curl x)' bash -xc ls",
    "bash --rcfile ./evil -i",
    "LD_PRELOAD=./evil.so ls",
    "GIT_DIR=/tmp/evil git status",
    "declare -n r=BASH_ENV; r=./evil; bash -c ls",
    "SHELL=/usr/bin/curl flock /tmp/l -c x",
    "BASH_CMDS[ls]=/usr/bin/curl; ls x",
    "shopt -s expand_aliases\nBASH_ALIASES[ls]='curl x'\nls",
    # 8. text filled in at run time
    "find . -exec sh -c 'cat {}' \\;",
    "ls | xargs -I{} sh -c 'echo {}'",
    "ls | xargs -I % bash -c 'cat %'",
    "ls | xargs -i sh -c 'echo {}'",
    # 9. found by the differential check against bash (test_policy_differential.py)
    "trap -- '-;curl x' EXIT",  # after --, an action that starts with - is still one
    "RANDOM='a[$(curl x)]'",  # bash's integer variables evaluate what they are given
    "OPTIND='a[$(curl x)]'; echo",
    "SRANDOM='a[$(curl x)]'",
    "bash -co posix 'curl x'",  # -o takes the next word: the command is the one after
    "sh -eco errexit 'curl x'",
    "coproc A=1 curl x; wait",  # shfmt reads A=1 as the command's name, bash as an assignment
    "coproc A='1' curl x; wait",
    "set -k; bash A=1 -c 'curl x'",  # assignments anywhere: not followed, so not allowed
    "set -o keyword; timeout A=1 5 curl x",
    "BASHPID+='a[$(curl x)]'",  # += is arithmetic for bash's integer variables
    "bash -login -c 'curl x'",  # one dash is enough for bash's long options
    "coproc curl x | cat",  # shfmt names the coproc curl; bash runs curl x
    "coproc curl x |& cat; wait",
    "time -- curl x",  # bash's time skips a --
    "time -p -- curl x",
    "! time -- curl x",
    "bash -i <<'EOF'\necho curl x\n!!:1-2\nEOF",  # interactive: history expansion
    "bash --posix -c 'time -v curl x'",  # POSIX mode: /usr/bin/time, not the keyword
    "POSIXLY_CORRECT=1 bash -c 'time -f %e curl x'",
    "declare -a a='($(curl x))'",  # a quoted value in parentheses is an array's elements
    "v='($(curl x))'; a=(); declare a=\"$v\"",
    "builtin typeset -a a='([$(curl x)]=1)'",
    "script -q -c 'echo hi' -c 'curl x' /dev/null",  # getopt: the last -c runs
    "git -c user.name=x -c 'alias.y=!curl x' y",  # every -c is read, past the first's value
    "prlimit -o RESOURCE curl x",  # -o takes a value; prlimit still runs its command
    "echo 'curl x' | xargs -I X -i sh -c {}",  # xargs: the last replace string is the one
    # 11. where shfmt's tree and bash differ (misreadings.py)
    "cat <<EOF\n${x-'\nEOF\ncurl x\n'}\nEOF",  # bash ends a here-document at its line
    "cat <<EOF\nEO\\\nF\ncurl x\nEOF",
    "echo $(cat <<EOF\nEOF)\ncurl x\nEOF\n)",
    "echo `echo '`; curl x #'`",  # bash ends `...` at the first backquote
    "sh <<-EOF\n\tcat <<X\n\tX\n\tcurl x\n\tX\nX\nEOF",  # <<- strips the script's tabs
    # 10. dash, the image's /bin/sh, reads sh -c as POSIX sh
    "sh -c \"echo \\$'a\\\\'\ncurl x\necho '\"",  # no $'...': the quote ends early
    "sh -c 'alias e=eval\ne \"curl x\"'",  # dash expands aliases
    "sh -c 'alias ls=curl\nls x'",
]
STILL_ALLOWED = [
    "time -- -- x",  # the second -- is the command
    "time '--' x",
    "trap - EXIT",
    "trap -- - EXIT",
    "trap -p EXIT",
    "set -euo pipefail; ls",
    "set -o; SECONDS=0; ls",
    "trap 'echo done' EXIT",
    "OPTIND=1; echo $RANDOM",
    "flock /tmp/lock -c 'ls'",
    "for i in 1 2 3; do echo $((i * 2)); done",
    "n=0; n=$((n + 1)); echo $n",
    "for ((i = 0; i < 3; i++)); do echo $i; done",
    "[[ $# -gt 0 ]] && echo x",
    "echo ${#HOME} $(( RANDOM % 10 ))",
    "echo $(( ${COUNT:-0} + 1 ))",
    "CC=clang make",
    'while IFS= read -r line; do echo "$line"; done < README',
    "x='a[$(curl x)]'; test \"$x\" -eq 1",  # test's -eq does not evaluate
    "git -c user.name=x status",
    "echo {a,b}{c,d} {1..3}",
    'declare -A m; m[key]=1; echo "${m[key]}"',
    "declare -A m; k='$(curl x)'; m[$k]=1; echo \"${m[$k]}\"",  # a key is text, used once
    "cat <<'E'\n$(curl x)\nE",
    "find . -name '*.py' -exec grep -l foo {} +",
]


@pytest.mark.parametrize("command", ATTACKS)
def test_what_bash_would_run_is_what_the_policy_judges(command: str) -> None:
    verdict = evaluate(DENY_LIST, command)
    assert verdict.decision == DENY, verdict.as_json()


@pytest.mark.parametrize("command", STILL_ALLOWED)
def test_near_misses_of_the_attacks_stay_allowed(command: str) -> None:
    verdict = evaluate(DENY_LIST, command)
    assert verdict.decision == ALLOW, verdict.as_json()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi > /dev/fd/../../../tmp/x", DENY),
        ("echo hi > /dev/stdout.log", DENY),
        ("echo hi > /dev/null.txt", DENY),
        ("cat 3<README.md >/dev/fd/3", DENY),  # reopens README.md for writing
        ("ls 2<README.md >/dev/stderr", DENY),
        ("ls 1<README.md >/dev/stdout", DENY),
        ("exec 3<README.md; echo hi >/dev/fd/3", DENY),
        ("{ echo hi >/dev/fd/4; } 4<README.md", DENY),
        ("ls 3>&1 >/dev/fd/3", ALLOW),
        ("echo hi > /dev/stderr", ALLOW),
        ("echo hi > /dev/fd/2", ALLOW),
        ("echo hi > /dev/tty", ALLOW),
        ("ls > >(wc -l)", ALLOW),  # a process substitution is no file
        ("ls 2> >(grep x >&2)", ALLOW),
    ],
)
def test_only_exact_device_paths_and_open_descriptors_are_not_writes(
    command: str, expected: Decision
) -> None:
    assert evaluate(POLICY, command).decision == expected, evaluate(POLICY, command).as_json()


@pytest.mark.parametrize(
    "command",
    ["PATH=.:$PATH ls", 'export PATH="$HOME/.local/bin:$PATH"; ls', "read PATH; ls"],
)
def test_a_changed_path_runs_a_program_the_command_does_not_name(command: str) -> None:
    """Under PATH=., ``ls`` may be any file: judged as a command no rule lists (the default),
    so an allow-list does not allow it, and a deny-list, which allows unlisted commands
    anyway, does."""
    assert evaluate(POLICY, command).decision == ASK
    assert evaluate(DENY_LIST, command).decision == ALLOW


@pytest.mark.parametrize("command", ["ls \udcff", "ls \x00 curl x", "echo \udc80; ls"])
def test_text_that_is_no_shell_command_is_denied_saying_why(command: str) -> None:
    verdict = evaluate(UNRESTRICTED, command)
    assert verdict.decision == DENY
    (part,) = verdict.parts
    assert part.kind == "syntax"
    assert "UTF-8" in part.rule or "NUL" in part.rule
    part.text.encode()  # shown as it can be printed


def test_a_word_of_thousands_of_braces_is_judged_without_expanding_them() -> None:
    """Reading its braces would take time quadratic in its length: past 64 braces a word is
    many words known at run time."""
    verdict = evaluate(DENY_LIST, "{" * 20000 + "curl,x" + "}" * 20000)
    assert verdict.decision == DENY
    assert "dynamic command name" in verdict.parts[0].rule


def test_a_wrapper_of_an_unknown_word_is_denied_only_where_something_is_denied() -> None:
    assert evaluate(UNRESTRICTED, "echo 'curl x' | bash").decision == ALLOW
    assert evaluate(DENY_LIST, "echo 'curl x' | bash").decision == DENY


# Attacks whose effect needs more than a fresh repository with a fake curl on PATH: a file or
# program of their own (./evil, ./bash, /usr/bin/curl, busybox, strace), another user, the
# network (git fetch, push), a pager's terminal, a value only the run gives ($N, $T, {}), or an
# effect other than running curl (a changed PATH, a shell reading stdin).
NEEDS_MORE_THAN_A_REPOSITORY = {
    "xargs -n $N curl", 'timeout "$T" ls', "su -", "su root -c 'curl x'",
    "su -c 'curl x' root", "su root -- -c 'curl x'", "runuser -u nobody -- curl x",
    "runuser -u nobody curl x", "su -s /usr/bin/curl root", "./bash -c 'curl x'",
    "/workspace/bin/timeout 5 curl x",
    "busybox wget x", "chroot /", "strace -o '|curl x' ls", "strace -o'!curl x' ls",
    "git -c core.pager='curl x' log", "git -C . push origin",
    "git --no-pager -c user.name=x push", "git --exec-path=. status", "git {push,origin}",
    "x='$(curl x)'; echo ${a[x]}", "x='a[$(curl x)]'; echo ${y:x}",
    "set -- 'a[$(curl x)]'; echo ${!#}", "hash -p /usr/bin/curl ls; ls x",
    "GIT_CONFIG_PARAMETERS=\"'core.pager=curl x'\" git log", "GIT_EXTERNAL_DIFF='curl x' git diff",
    "GIT_SSH_COMMAND='curl x' git fetch", "export GIT_SSH_COMMAND='curl x'; git fetch",
    "env GIT_PAGER='curl x' git log", "read GIT_SSH_COMMAND <<< x; git fetch",
    "npm_config_script_shell=/usr/bin/curl npm test", "BASH_ENV=./evil bash -c ls",
    "ENV=./evil sh -c ls", "PS4='$(curl x)' bash -xc ls", "bash --rcfile ./evil -i",
    "LD_PRELOAD=./evil.so ls", "GIT_DIR=/tmp/evil git status",
    "declare -n r=BASH_ENV; r=./evil; bash -c ls",
    "command declare -n r=BASH_ENV; r=./evil; bash -c ls", "SHELL=/usr/bin/curl flock /tmp/l -c x",
    "BASH_CMDS[ls]=/usr/bin/curl; ls x", "find . -exec sh -c 'cat {}' \\;",
    "ls | xargs -I{} sh -c 'echo {}'", "ls | xargs -I % bash -c 'cat %'",
    "ls | xargs -i sh -c 'echo {}'", "bash -login -c 'curl x'",  # a login shell's PATH
}  # fmt: skip


def test_the_attacks_run_curl_in_bash(tmp_path: Path) -> None:
    """Each attack the table denies runs curl (or wget) in bash itself: the rows are what
    bash does, not what a parser guesses. A fake curl on PATH records that it ran; each
    attack runs in a fresh git repository of its own, its stdin empty."""
    runnable = [a for a in ATTACKS if a not in NEEDS_MORE_THAN_A_REPOSITORY]
    assert len(runnable) >= 60
    tools = tmp_path / "bin"
    tools.mkdir()
    marker = tmp_path / "ran"
    for name in ("curl", "wget"):
        fake = tools / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*" >> {marker}\n')
        fake.chmod(0o755)
    silent = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    ran_nothing = []
    for index, attack in enumerate(runnable):
        repository = tmp_path / f"r{index}"
        subprocess.run(["git", "init", "-q", str(repository)], check=True)
        (repository / "README").write_text("x\n")
        (repository / "README.md").write_text("x\n")
        env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(repository), "LC_ALL": "C"}
        marker.unlink(missing_ok=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(["bash", "-c", attack], cwd=repository, env=env, timeout=10,
                           stdin=subprocess.DEVNULL, **silent)  # fmt: skip
        if not marker.exists():
            ran_nothing.append(attack)
    assert ran_nothing == []


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("~/bin/evil x", DENY),  # ~ is HOME, as bash expands it: a rule on the path matches
        ("/home/paddock/bin/evil", DENY),
        ("cat ~/notes.txt", ALLOW),  # a rule's own ~/ means the same
        ("cat /home/paddock/notes.txt", ALLOW),
        ("cat '~/notes.txt'", ASK),  # a quoted ~ is itself
        ("ls ~root/x", ASK),  # another user's home: only known at run time
        ("~root/curl x", DENY),
    ],
)
def test_a_tilde_is_the_sandboxs_home(command: str, expected: Decision) -> None:
    policy = SandboxPolicySpec.model_validate(
        {"commands": {"allow": ["cat ~/notes*"], "deny": ["/home/paddock/bin/evil*", "curl*"]}}
    )
    assert evaluate(policy, command).decision == expected
