"""The bash the engine models, and nothing else (docs/policy.md, "What the engine reads"): a
construct outside it gets the strictest verdict the policy gives any command, and says which
construct; ``sh -c`` is read as dash, the image's ``/bin/sh``, reads it."""

from __future__ import annotations

import pytest

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.engine import evaluate

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY

# A deny-list: what the engine does not follow would be allowed, were it judged as written.
DENY_LIST = SandboxPolicySpec.model_validate(
    {"commands": {"deny": ["curl*", "rm*"], "default": "allow"}, "capabilities": {}}
)
# Every command allowed, with no file written, or with any.
NO_WRITES = SandboxPolicySpec.model_validate(
    {"commands": {"default": "allow"}, "capabilities": {"fileWrite": "deny"}}
)
WRITES = SandboxPolicySpec.model_validate(
    {"commands": {"default": "allow"}, "capabilities": {"fileWrite": "allow"}}
)
# Nothing denied, some asked: the strictest is ask.
ASKING = SandboxPolicySpec.model_validate(
    {"commands": {"ask": ["git push*"], "default": "allow"}, "capabilities": {}}
)

OUTSIDE = {
    "alias ll='ls -l'; ll": "an alias",
    "sh -c 'alias e=eval\ne \"curl x\"'": "an alias",
    "alias $A": "an alias",
    "shopt -s expand_aliases": "shopt -s expand_aliases",
    "shopt -u interactive_comments": "shopt -u interactive_comments",
    "shopt -so keyword": "shopt -so keyword",
    "shopt -s $OPT": "shopt given $OPT",
    "bash -O expand_aliases -c ls": "-O expand_aliases",
    "bash +O extquote -c ls": "+O extquote",
    "bash -i <<'EOF'\necho x\nEOF": "bash -i",
    "bash -lic ls": "bash -lic",
    "bash --posix -c 'time -v ls'": "bash --posix",
    "POSIXLY_CORRECT=1 bash -c 'time -v ls'": "POSIXLY_CORRECT",
    "declare -a a='($(ls))'": "a declared value in parentheses",
    "v='(x)'; a=(); declare a=\"$v\"": "a declared value in parentheses",
    "builtin typeset -a a='(x)'": "a declared value in parentheses",
    "script -q -c 'echo hi' -c 'ls' /dev/null": "given the command it runs more than once",
    "script -q --command=ls --command='echo hi' /dev/null": "more than once",
    "set -k; ls": "set -k",
    "set +o braceexpand": "set +o braceexpand",
    "declare -n r=A": "a nameref",
    "local -n r": "a nameref",
    "command typeset -n r=A": "a nameref",
    "zsh -c ls": "zsh: Paddock reads only bash's and dash's language",
    "ksh -c ls": "ksh: Paddock reads only",
    "busybox sh -c ls": "busybox sh: Paddock reads only",
    "coproc c { ls; }": "coproc",
    "echo $(coproc ls x)": "coproc",  # bash runs a command COPROC here
}


@pytest.mark.parametrize(("policy", "strictest"), [(DENY_LIST, DENY), (ASKING, ASK)])
@pytest.mark.parametrize("command", list(OUTSIDE))
def test_a_construct_outside_the_model_gets_the_strictest_verdict_and_is_named(
    policy: SandboxPolicySpec, strictest: Decision, command: str
) -> None:
    verdict = evaluate(policy, command)
    assert verdict.decision == strictest
    assert OUTSIDE[command] in verdict.explain()


@pytest.mark.parametrize(
    "command",
    ["shopt -s globstar extglob", "shopt -p", "shopt -q nullglob", "bash -O globstar -c ls",
     "alias", "alias ll", "trap '' INT", "trap - EXIT", "trap -p", "export -n A",
     "set -euo pipefail", "trap 'echo done' EXIT", "set -a; source .env; set +a",
     "shopt -s nullglob; ls *.txt", "local x=\"$1\"", "export a='(x)'"],
)  # fmt: skip
def test_what_changes_only_globs_output_or_signals_stays_allowed(command: str) -> None:
    assert evaluate(DENY_LIST, command).decision == ALLOW


# (command, a part the engine judges): sh -c TEXT read as dash reads TEXT.
AS_DASH = [
    ("sh -c '{curl,x}'", "{curl,x}"),  # no brace expansion: dash looks up the name {curl,x}
    ("sh -c 'A+=1'", "A+=1"),  # not an assignment: a name
    ("sh -c '[[ -n x ]]'", "[[ -n x ]]"),  # no [[ keyword: a name
    ("sh -c 'let A=1'", "let A=1"),
    ("sh -c 'declare A=1'", "declare A=1"),
    ("sh -c 'echo $\"x\"'", "echo $x"),  # no locale strings: $ and "x"
    ("dash -c \"echo $'\\x63url'\"", "echo $\\x63url"),  # no $'...'
    ("/bin/sh -c '((curl x))'", "curl x"),  # two subshells, not arithmetic
    ("sh <<'EOF'\n{curl,x}\nEOF", "{curl,x}"),  # a here-document sh reads as its script
    ("sh -c 'eval \"{curl,x}\"'", "{curl,x}"),  # eval in dash reads as dash
    ("watch '{curl,x}'", "{curl,x}"),  # watch runs sh -c
]


@pytest.mark.parametrize(("command", "part"), AS_DASH)
def test_sh_c_text_is_read_as_dash_reads_it(command: str, part: str) -> None:
    verdict = evaluate(DENY_LIST, command)
    assert part in [p.text for p in verdict.parts]


def test_bash_c_text_is_read_as_bash_reads_it() -> None:
    assert evaluate(DENY_LIST, "bash -c '{curl,x}'").decision == DENY
    assert "curl x" in [p.text for p in evaluate(DENY_LIST, "bash -c '{curl,x}'").parts]
    assert evaluate(DENY_LIST, "bash -c 'A+=1; [[ -n x ]]'").decision == ALLOW


@pytest.mark.parametrize(
    "command",
    ["sh -c 'cat <<< x'", "sh -c 'a=(1 2)'", "sh -c 'ls &> out'", "sh -c 'f() { ls; }; cat <(f)'"],
)
def test_bash_syntax_dash_would_not_run_is_denied_saying_so(command: str) -> None:
    verdict = evaluate(DENY_LIST, command)
    assert verdict.decision == DENY
    assert "unparsable as sh (dash)" in verdict.explain()


@pytest.mark.parametrize(
    "command", ["flock /tmp/l -c '{curl,x}'", "su nobody -c '{curl,x}'", "PAGER='{curl,x}' git log"]
)
def test_text_run_by_a_users_shell_is_read_as_both_bash_and_dash(command: str) -> None:
    """flock, su and a pager run $SHELL, the user's shell or /bin/sh: either reading."""
    texts = [p.text for p in evaluate(DENY_LIST, command).parts]
    assert "curl x" in texts
    assert "{curl,x}" in texts


# Words that may expand to no word at all (an unquoted $X, "$@", what xargs reads): a rule
# is matched with each of them present and gone.
EXACT = SandboxPolicySpec.model_validate(
    {
        "commands": {"allow": ["echo *", "git diff *"], "deny": ["git push"], "ask": ["ls -l"]},
        "capabilities": {},
    }
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [("git $X push", DENY), ('git "$@" push', DENY), ("git push $A $B", DENY),
     ("ls $X -l", ASK), ("git diff $X", ALLOW), ("echo $HOME", ALLOW), ("xargs echo", ALLOW),
     ("git diff", ALLOW)],
)  # fmt: skip
def test_a_word_that_may_vanish_is_matched_gone_too(command: str, expected: Decision) -> None:
    assert evaluate(EXACT, command).decision == expected


def test_a_glob_ending_in_a_star_word_matches_without_that_word_too() -> None:
    policy = SandboxPolicySpec.model_validate(
        {"commands": {"allow": ["git diff *"], "default": "deny"}, "capabilities": {}}
    )
    assert evaluate(policy, "git diff").decision == ALLOW
    assert evaluate(policy, "git diff HEAD").decision == ALLOW
    assert evaluate(policy, "git diffx").decision == DENY


def test_a_name_holding_white_space_is_no_allowed_programs_name() -> None:
    """'echo x' is a program of its own (from a directory of PATH the agent may write)."""
    policy = SandboxPolicySpec.model_validate(
        {"commands": {"allow": ["echo *"], "default": "ask"}, "capabilities": {}}
    )
    assert evaluate(policy, "'echo x'").decision == ASK
    assert evaluate(policy, "echo x").decision == ALLOW


def test_too_many_words_that_may_vanish_cannot_be_told() -> None:
    command = "git " + " ".join(f"$V{i}" for i in range(8)) + " status"
    assert evaluate(EXACT, command).decision == DENY


@pytest.mark.parametrize(
    ("command", "expected"),
    [("cat < /dev/tcp/10.0.0.1/80", DENY), ("exec 3<>/dev/udp/10.0.0.1/53", DENY),
     ("cat < /dev/tcp/$HOST/80", DENY), ("echo x > /dev/tcp/h/1", DENY),
     ("cat < //dev/tcp/10.0.0.1/80", ALLOW)],  # bash matches the text: //dev/tcp is a file
)  # fmt: skip
def test_bashs_own_connections_are_judged_by_capabilities_network(
    command: str, expected: Decision
) -> None:
    no_network = SandboxPolicySpec.model_validate(
        {
            "commands": {"default": "allow"},
            "capabilities": {"fileWrite": "allow", "network": "deny"},
        }
    )
    assert evaluate(no_network, command).decision == expected
    assert evaluate(ASKING, command).decision == ALLOW  # network: allow


@pytest.mark.parametrize(
    "command", ["status=$?; echo $((status + 1))", "RANDOM=$$", 'n="$#"; (( n > 1 ))']
)
def test_a_value_that_is_a_number_whatever_ran_is_safe_to_evaluate(command: str) -> None:
    assert evaluate(DENY_LIST, command).decision == ALLOW


@pytest.mark.parametrize(
    "command", [">f", "true && >>f", "echo $(>f)", "sh -c '>f'", "{ >f; }", "2>f"]
)
def test_a_statement_of_redirections_alone_writes_its_file(command: str) -> None:
    assert evaluate(NO_WRITES, command).decision == DENY
    assert "file-write" in evaluate(NO_WRITES, command).explain()


# Where shfmt's tree and bash read the text differently: refused (misreadings.py).
MISREAD = [
    "cat <<EOF\n${x-'\nEOF\ncurl x\n'}\nEOF",  # bash ends the body at the first EOF line
    "cat <<EOF\n$(cat <<'X'\nEOF\ncurl x\nX\n)\nEOF",
    "cat <<EOF\nEO\\\nF\ncurl x\nEOF",  # backslash-newline joined: the line is EOF
    "echo $(cat <<EOF\nEOF)\ncurl x\nEOF\n)",  # in $(...), EOF) ends it too
    "cat <<-EOF\n\t${x-'\n\tEOF\ncurl x\n'}\nEOF",  # <<-: tabs stripped first
    "echo `echo '`; curl x #'`",  # bash ends `...` at the first backquote
    "x=`: '`; curl x #'`",
    "echo `cat <<'E'\n`; curl x\nE\n`",
    "trap 'echo `echo '\"'\"'`; curl x #'\"'\"'`' EXIT",
    "!(curl x)",  # bash: ! and a subshell; shfmt: an extended glob
    'echo "$\\\n(curl x)"',  # bash joins the lines first: $(curl x)
    "cat <<E\n$\\\n(curl x)\nE",
    "cat <<true\r\ntrue\necho '$(curl x)'\ntrue\r\n",  # \r: a word character to bash
    "cat <<E\n${x:-'$(curl x)'}\nE",  # quotes in ${...} in a body: text, and expanded
]


@pytest.mark.parametrize("command", MISREAD)
def test_text_shfmt_and_bash_read_differently_is_refused(command: str) -> None:
    verdict = evaluate(WRITES, command)
    assert verdict.decision == DENY
    assert "unparsable" in verdict.explain()


@pytest.mark.parametrize(
    "command",
    ["cat <<EOF\nhello $USER\nEOF", "cat <<-EOF\n\thello\n\tEOF", "echo `date`",
     'echo "`date +%s`"', "echo `echo \\`date\\``", "cat <<'EOF'\n$(x) `y`\nEOF",
     "cat <<EOF\nEOFX\nEOF"],
)  # fmt: skip
def test_here_documents_and_backquotes_read_alike_stay_allowed(command: str) -> None:
    assert evaluate(DENY_LIST, command).decision == ALLOW


def test_a_here_document_a_shell_reads_loses_its_tabs_for_dash_minus() -> None:
    """``sh <<-EOF``: the script is the body with each line's leading tabs gone."""
    command = "sh <<-EOF\n\tcat <<X\n\tX\n\tcurl x\n\tX\nX\nEOF"
    assert evaluate(DENY_LIST, command).decision == DENY
    assert "curl x" in [p.text for p in evaluate(DENY_LIST, command).parts]


@pytest.mark.parametrize(
    ("command", "written"),
    [("\\time -o out true", "out"), ("strace -o trace.txt true", "trace.txt"),
     ("ltrace -o l.txt true", "l.txt"), ("valgrind --log-file=v.txt true", "v.txt"),
     ("flock /tmp/lock true", "/tmp/lock"), ("script -q -c 'echo hi'", "typescript"),
     ("script -q -c 'echo hi' log.txt", "log.txt")],
)  # fmt: skip
def test_a_file_a_wrapper_writes_itself_is_judged_as_a_write(command: str, written: str) -> None:
    parts = evaluate(NO_WRITES, command).parts
    assert ("file-write", written) in [(p.kind, p.text) for p in parts]


@pytest.mark.parametrize("command", ["flock 9 true", "script -q /dev/null -c 'echo hi'"])
def test_a_wrapper_writing_no_file_writes_none(command: str) -> None:
    assert evaluate(NO_WRITES, command).decision == ALLOW


def test_a_wrappers_write_into_a_protected_place_is_denied() -> None:
    for command in ["strace -o ~/.bashrc true", "flock ~/.bash_logout true",
                    "script -q -c 'echo x' ~/.bashrc"]:  # fmt: skip
        assert evaluate(WRITES, command).decision == DENY


@pytest.mark.parametrize(
    "command",
    ["bash -c 'echo x >/dev/fd/0' <README", "eval 'echo x >/dev/fd/3' 3<README",
     "sh -c 'echo x >/dev/fd/3' 3<README", "exec 3<README; eval 'echo x >/dev/fd/3'",
     "eval 'exec 3<README'; echo x >/dev/fd/3", "find . -maxdepth 0 -fprint out",
     "script -qc ls out.txt"],
)  # fmt: skip
def test_a_descriptor_opened_onto_a_file_anywhere_in_the_command_writes_it(command: str) -> None:
    assert evaluate(NO_WRITES, command).decision == DENY


@pytest.mark.parametrize(
    "command",
    ["echo x > /dev/stderr", "bash -c 'echo x >/dev/stderr'", "cat < f; echo x > /dev/stdout",
     "script -qc 'make test' /dev/null", "script -qec 'npm test' /dev/null"],
)  # fmt: skip
def test_a_descriptor_left_as_it_came_writes_no_file(command: str) -> None:
    assert evaluate(NO_WRITES, command).decision == ALLOW


GIT = SandboxPolicySpec.model_validate(
    {"commands": {"deny": ["curl*", "rm*", "git push*"], "default": "allow"},
     "capabilities": {"fileWrite": "deny"}}
)  # fmt: skip


@pytest.mark.parametrize(
    "command",
    ["git -C . -c alias.p=push p origin", "git --no-literal-pathspecs push origin x",
     "git --some-new-option push", "/usr/lib/git-core/git-push origin x",
     "git difftool -y -x 'curl x' HEAD", "git difftool -y --extcmd=rm",
     "git rebase -q --exec 'curl x' HEAD~1", "git rebase -xcurl HEAD~1", "git bisect run curl x",
     "git submodule foreach --recursive 'curl x'", "git filter-branch --tree-filter 'rm x' HEAD",
     "git diff --output=/tmp/w HEAD~1", "git log --output out"],
)  # fmt: skip
def test_what_git_runs_or_writes_through_its_options_is_judged(command: str) -> None:
    assert evaluate(GIT, command).decision == DENY


@pytest.mark.parametrize(
    "command",
    ["git status --short", "git -C sub log --oneline", "git --no-pager diff", "git --version",
     "git -c user.name=x commit -m y", "git rebase -i HEAD~2", "git difftool --tool-help"],
)  # fmt: skip
def test_everyday_git_stays_allowed(command: str) -> None:
    assert evaluate(GIT, command).decision == ALLOW


@pytest.mark.parametrize(
    "command",
    ["strace -E LD_PRELOAD=/tmp/x.so ls", "fakeroot --faked /tmp/fk ls", "fakeroot -l x.so ls",
     "unshare -r -R /tmp/root ls", "chroot /tmp/root ls", "VALGRIND_LIB=/tmp/v valgrind ls",
     "prlimit --output=RESOURCE curl x"],
)  # fmt: skip
def test_a_wrapper_that_runs_another_program_or_loads_code_cannot_be_told(command: str) -> None:
    assert evaluate(GIT, command).decision == DENY
