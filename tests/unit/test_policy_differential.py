"""The policy engine checked against the shells it models: a command the engine allows must
not run, under the real bash 5.2, any program the policy denies or asks about (nor look one up
on PATH), nor write a file or reach the network when the policy says no; nor, run by dash (the
image's ``/bin/sh``), when the engine allows ``sh -c COMMAND``
(support/shell_differential.py runs it, with every program a fake that records its argv).

The commands come from a generator over bash's grammar (hypothesis: seeded, so a CI run is one
run; ``PADDOCK_DIFFERENTIAL_EXAMPLES`` runs more), from every case of the engine's unit tables,
and from everyday commands, which must also stay allowed."""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.engine import evaluate
from support.shell_differential import FAKES, RUNNING, Ran, Shells

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")

# What the generator's commands are judged by: a few programs allowed, everything else
# denied, and no file written or host reached.
POLICY = SandboxPolicySpec.model_validate(
    {
        "commands": {
            "allow": ["echo *", "printf *", "ls*", "cat *", "true", "grep *", "wc *",
                      "head *", "test *", "cd *", "export *", "git status*"],
            "deny": ["rm *", "curl *"],
            "default": "deny",
        },
        "capabilities": {"fileWrite": "deny", "network": "deny"},
    }
)  # fmt: skip


# ... and by a deny-list, where a part the engine misreads is allowed: the policy most attacks
# aim at.
DENY_LIST = SandboxPolicySpec.model_validate(
    {
        "commands": {"deny": ["rm*", "curl*", "touch*"], "default": "allow"},
        "capabilities": {"fileWrite": "deny", "network": "deny"},
    }
)
POLICIES = {"allow-list": POLICY, "deny-list": DENY_LIST}


@pytest.fixture(scope="module")
def shells() -> Iterator[Shells]:
    with Shells() as running:
        yield running


KNOWN = frozenset(FAKES) | frozenset(RUNNING)
# The command each shell's run is compared with: the gate's command is run by bash; dash runs
# it when bash runs ``sh -c COMMAND``.
AS_RUN = {"bash": lambda command: command, "dash": lambda command: f"sh -c {shlex.quote(command)}"}


def divergences(policy: SandboxPolicySpec, command: str, ran: dict[str, Ran]) -> list[str]:
    """What ``command`` did, in each shell whose run the engine allows, that the allow should
    have kept it from: a program the policy does not allow (judged alone, as the argv it ran;
    a shell's own argv is not, as it may read its script from stdin: what it runs is recorded
    itself), a name looked up on PATH that the policy does not allow, a file written while
    fileWrite is not allow, a connection while network is not allow."""
    found = []
    for shell, what in ran.items():
        if evaluate(policy, AS_RUN[shell](command)).decision != Decision.ALLOW:
            continue
        for name in set(what.missing) - KNOWN:  # (a known program, where PATH was changed)
            judged = evaluate(policy, shlex.join(["command", name]))  # a name, not a keyword
            if judged.decision != Decision.ALLOW:
                found.append(f"{shell} looked up {name!r} on PATH: {judged.explain()}")
        for argv in what.programs:
            if argv[0] in ("bash", "sh", "dash"):
                continue
            judged = evaluate(policy, shlex.join(["command", *argv]))  # an argv, not bash
            if judged.decision != Decision.ALLOW:
                found.append(f"{shell} ran {shlex.join(argv)!r}: {judged.explain()}")
        if what.written and policy.capabilities.file_write != Decision.ALLOW:
            found.append(f"{shell} wrote {list(what.written)}")
        if what.network and policy.capabilities.network != Decision.ALLOW:
            found.append(f"{shell} opened a /dev/tcp connection")
    return found


# -- The generator ----------------------------------------------------------------------------

PROGRAMS = ["echo", "printf", "ls", "cat", "true", "grep", "wc", "head", "rm", "curl", "touch"]
WRAPPERS = ["env", "env A=1", "timeout 1", "nohup", "nice", "command", "builtin", "exec",
            "time", "xargs", "setsid", "stdbuf -o0", "eval", "sh -c", "bash -c"]  # fmt: skip
WORDS = ["x", "a.txt", "-n", "--", "$HOME", "$A", "${A:-rm}", "*", "'q'", '"q"', "$'\\x72m'",
         "$'\\162m'", "$'\\u0072m'", "$'\\562m'", "{rm,x}", "$(echo rm)", "`echo rm`",
         "$((1+2))", "~", "\\rm", "r''m", '"$(cat a.txt)"', "$(<a.txt)", "!", "#", "\\\n",
         "$\\\n(echo rm)", "//dev/stdin", "/./proc/self/fd/0", "$0", "$@", "${!A}", "'`'",
         "\"'\"", "EOF", "\\`rm\\`", "~+/a.txt", "*.txt"]  # fmt: skip
# Bash's syntax that dash reads otherwise (a name, two subshells, no brace expansion).
BASHISMS = ["[[ -n x ]]", "A+=1", "let A=1", "declare A=rm", "((A=1))", 'echo $"rm"',
            "{ls,x}", "{rm,x} y", "echo ~+", "select x in a; do break; done",
            "function g { rm z; }; g", "local A=rm"]  # fmt: skip
PREFIXES = ["A=rm ", "IFS=m ", "PATH=/x ", "BASH_ENV=scripts/run.sh ", "ENV=scripts/run.sh "]
REDIRECTS = [" > out", " 2>&1", " < a.txt", " >/dev/null", " >> b.txt", " <<< rm",
             " > //dev/null", " 3<>/dev/tcp/127.0.0.1/9", " 2>/dev/null </dev/tcp/127.0.0.1/9",
             " 2>/dev/null 4</dev/udp/127.0.0.1/9"]  # fmt: skip
SETUPS = ["set -k; ", "set +B; ", "set -f; ", "shopt -s expand_aliases; alias ls=rm; ",
          "alias e=eval; ", "declare -n r=A; A=rm; ", "A=rm; ", "set -- rm x; ", "IFS=x; ",
          "shopt -s extglob; ", "unset PATH; ", "hash -p /usr/bin/rm ls; ", "enable -n echo; ",
          "export BASH_ENV=scripts/run.sh; ", "typeset -i n; ", "set -o posix; ",
          "trap 'rm t' EXIT; ", "trap -- '-;rm u' EXIT; ", "set -H; ", "OPTIND=1; ",
          "RANDOM='a[$(rm v)]'; ", "f() { rm w; }; ", "shopt -s nullglob; ",
          "shopt -u interactive_comments; ", "shopt -s expand_aliases\nalias ls=rm\n",
          "alias ls=rm\n", "trap 'rm t' DEBUG; ", "trap '' INT; ", "shopt -s globstar; ",
          "cd ~; "]  # fmt: skip


def _simple() -> st.SearchStrategy[str]:
    word = st.sampled_from(WORDS + PROGRAMS)
    return st.builds(
        lambda prefix, wrapper, program, words, redirect: (
            prefix + (wrapper + " " if wrapper else "") + program
            + "".join(" " + w for w in words) + redirect
        ),
        st.sampled_from(["", *PREFIXES]),
        st.sampled_from(["", *WRAPPERS[:12]]),
        st.sampled_from([*PROGRAMS, "r''m", "\\rm", "$A", "${A}", "$(echo rm)", "/bin/rm"]),
        st.lists(word, max_size=3),
        st.sampled_from(["", *REDIRECTS]),
    )  # fmt: skip


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    joined = st.builds(
        lambda a, joiner, b: a + joiner + b,
        inner, st.sampled_from(["; ", " && ", " || ", " | ", " & ", "\n", " |& "]), inner,
    )  # fmt: skip
    quoted = st.builds(
        lambda how, text: f"{how} {shlex.quote(text)}",
        st.sampled_from(
            [
                "eval",
                "sh -c",
                "bash -c",
                "bash -co posix",
                "time --",
                "watch -x",
                "dash -c",
                "bash -O expand_aliases -c",
                "sh -ec",
                "command eval",
            ]
        ),
        inner,
    )
    shapes = ["( {} )", "{{ {}; }}", "if true; then {}; fi", "for i in 1; do {}; done",
              "case x in *) {};; esac", "g() {{ {}; }}; g", "echo $({})", "echo `{}`",
              "cat <({})", "! {}", "coproc {}", "(({}))", "cat <<EOF\n{}\nEOF",
              "sh <<-EOF\n\t{}\n\tEOF", "bash <<'EOF'\n{}\nEOF", "echo \"`{}`\"",
              "cat <<EOF\n$({})\nEOF", "x=`{}`"]  # fmt: skip
    shaped = st.builds(lambda shape, text: shape.format(text), st.sampled_from(shapes), inner)
    set_up = st.builds(lambda setup, text: setup + text, st.sampled_from(SETUPS), inner)
    return st.one_of(joined, quoted, shaped, set_up)


COMMANDS = st.recursive(st.one_of(_simple(), st.sampled_from(BASHISMS)), _extend, max_leaves=5)
EXAMPLES = int(os.environ.get("PADDOCK_DIFFERENTIAL_EXAMPLES", "150"))


@seed(20261207)
@settings(
    max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(command=COMMANDS)
def test_a_generated_command_the_engine_allows_runs_nothing_else(
    shells: Shells, command: str
) -> None:
    ran = shells.run(command)
    for policy in POLICIES.values():
        assert divergences(policy, command, ran) == []


# -- The unit tables ---------------------------------------------------------------------------


def _engine_tables() -> object:
    path = Path(__file__).with_name("test_policy_engine.py")
    spec = importlib.util.spec_from_file_location("engine_tables", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("engine_tables", module)
    spec.loader.exec_module(module)
    return module


TABLES = _engine_tables()
TABLED = (
    [(TABLES.POLICY, command) for command, _ in TABLES.CASES]  # type: ignore[attr-defined]
    + [(TABLES.DENY_LIST, command) for command in TABLES.ATTACKS]  # type: ignore[attr-defined]
    + [(TABLES.POLICY, command) for command in TABLES.STILL_ALLOWED]  # type: ignore[attr-defined]
)


@pytest.mark.parametrize(("policy", "command"), TABLED, ids=range(len(TABLED)))
def test_a_command_of_the_engines_tables_the_engine_allows_runs_nothing_else(
    shells: Shells, policy: SandboxPolicySpec, command: str
) -> None:
    assert divergences(policy, command, shells.run(command)) == []


# -- Everyday work -----------------------------------------------------------------------------

EVERYDAY_POLICY = SandboxPolicySpec.model_validate(
    {
        "commands": {
            "allow": ["ls*", "cat *", "grep *", "git status*", "git diff*", "git log*",
                      "git add *", "git commit *", "npm test*", "npm run *", "npm ci*",
                      "pnpm *", "make*", "pytest*", "python -m pytest*", "go test *",
                      "go build *", "cargo build*", "cargo test*", "echo *", "printf *",
                      "head*", "tail *", "wc *", "sort*", "uniq*", "find *", "sed -n *", "[ *",
                      "mkdir *", "cp *", "mv *", "touch *", "diff *", "tar *", "jq *",
                      "cd *", "test *", "true"],
            "deny": ["rm -rf /*", "curl *", "git push*"],
            "default": "deny",
        },
        "capabilities": {"fileWrite": "allow", "network": "deny"},
    }
)  # fmt: skip
EVERYDAY = [
    "ls -la", "git status --short", "git diff HEAD~1 -- src/", "git log --oneline -5",
    "git add -A && git commit -m 'fix: the thing'", "npm ci && npm test", "npm run build",
    "pnpm install && pnpm test", "make -j4 test", "pytest -q tests/", "python -m pytest -x",
    "go test ./...", "go build -o bin/app ./cmd/app", "cargo build --release",
    "cargo test -- --nocapture", "grep -rn 'TODO' src | head -20", "find . -name '*.py' | wc -l",
    "sort a.txt | uniq -c | sort -rn | head", "sed -n '1,20p' a.txt", "mkdir -p build/out",
    "cp a.txt build/ && mv build/a.txt build/b.txt", "touch .done", "diff -u a.txt b.txt",
    "tar czf out.tgz src", "jq '.version' package.json", "cat a.txt > copy.txt",
    "echo \"$HOME\" && printf '%s\\n' x", "cd src && ls", "test -f a.txt && echo yes",
    "for f in *.txt; do wc -l \"$f\"; done", "if [ -d build ]; then ls build; fi",
    "tail -n 50 log.txt 2>/dev/null || true",
]  # fmt: skip


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_work_stays_allowed_and_runs_nothing_else(shells: Shells, command: str) -> None:
    assert evaluate(EVERYDAY_POLICY, command).decision == Decision.ALLOW
    assert evaluate(EVERYDAY_POLICY, f"sh -c {shlex.quote(command)}").decision == Decision.ALLOW
    assert divergences(EVERYDAY_POLICY, command, shells.run(command)) == []
