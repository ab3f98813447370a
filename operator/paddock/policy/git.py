"""git's own options before its subcommand (``git -C dir push`` pushes, ``git -c
core.pager=CMD log`` runs CMD), and what a subcommand runs or writes through its options
(``git rebase --exec CMD``, ``git difftool -x CMD``, ``git diff --output=FILE``)."""

from __future__ import annotations

from paddock.policy.outcomes import Runs, Shell, Unknown
from paddock.policy.words import Word

# Global options followed by a value, and those without one.
VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                    "--super-prefix", "--shallow-file", "--attr-source",
                    "--list-cmds"})  # fmt: skip
FLAGS = frozenset(
    {"-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects",
     "--literal-pathspecs", "--no-literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
     "--icase-pathspecs", "--no-optional-locks", "--no-lazy-fetch", "--no-advice",
     "--version", "-v", "--help", "-h", "--html-path", "--man-path", "--info-path",
     "--exec-path"}
)  # fmt: skip
# Configs that run nothing, whatever their value (``git -c user.name=x``).
HARMLESS_KEYS = ("user.", "color.", "advice.", "core.quotepath", "init.defaultbranch",
                 "commit.gpgsign", "log.", "pull.rebase", "diff.noprefix", "column.",
                 "core.autocrlf", "push.default", "merge.conflictstyle", "i18n.")  # fmt: skip
# Options that point git at another repository's config, or at the programs it runs.
ELSEWHERE = ("--git-dir", "--exec-path=", "--shallow-file", "--attr-source")
# A subcommand's options whose value is shell text it runs: (subcommand, option).
SCRIPT_OPTIONS = {("difftool", "-x"), ("difftool", "--extcmd"), ("rebase", "-x"),
                  ("rebase", "--exec")}  # fmt: skip
DASHED = "git-"  # /usr/lib/git-core/git-push is git push


def subcommand(words: tuple[Word, ...]) -> tuple[Word, ...] | None:
    """``git SUBCOMMAND ...`` without the global options before it (``git-push ...`` as
    ``git push ...``), or None when they are not all known (then only the command as written
    is matched; ``configs`` denies such a command anyway)."""
    name = words[0].pattern.rsplit("/", 1)[-1]
    if name.startswith(DASHED) and len(name) > len(DASHED):
        return (Word("git", "git"), Word(name[len(DASHED) :], name[len(DASHED) :]), *words[1:])
    index = 1
    while index < len(words) and words[index].pattern.startswith("-"):
        option, has_value, _ = words[index].pattern.partition("=")
        if option in FLAGS:
            index += 1
        elif option in VALUES:
            index += 1 if has_value else 2
        else:
            return None
    return (words[0], *words[index:]) if index > 1 else None


def configs(args: tuple[Word, ...]) -> list[Runs | Unknown] | None:
    """What git's own options make run that cannot be told (a config that may name a program,
    another repository's config, another directory of git's programs, an option Paddock does
    not know), and what its subcommand runs or writes through its options."""
    index = 0
    while index < len(args) and (not args[index].literal or args[index].pattern.startswith("-")):
        word = args[index]
        option, has_value, value = word.pattern.partition("=")
        if not word.literal or word.pattern.startswith(ELSEWHERE):
            return [Unknown(f"git {word.shown}: what it runs is only known at run time")]
        if option not in FLAGS | VALUES:
            return [Unknown(f"git has an option Paddock does not know: {word.shown}")]
        setting = None
        if option in VALUES and not has_value:
            setting = args[index + 1] if index + 1 < len(args) else Word("", "")
            index += 1
        elif option == "--config-env":
            setting = Word(value, value)
        index += 1
        if option in ("-c", "--config-env") and setting is not None:
            key = setting.pattern.partition("=")[0].lower()
            if not setting.literal or not key.startswith(HARMLESS_KEYS):
                return [
                    Unknown(f"git {option} {setting.shown} sets a config that may run a program")
                ]
    return subcommand_runs(args[index:]) or None


def subcommand_runs(args: tuple[Word, ...]) -> list[Runs | Unknown]:
    """What ``git SUBCOMMAND ARGS`` runs or writes through its options: ``rebase --exec``,
    ``difftool -x`` (shell text), ``bisect run CMD``, ``submodule foreach CMD``,
    ``filter-branch --*-filter CMD``, and the file of ``--output``."""
    if not args:
        return []
    name, rest = args[0].pattern, args[1:]
    found: list[Runs | Unknown] = []
    if name == "bisect" and rest and rest[0].pattern == "run" and len(rest) > 1:
        found.append(Runs(words=rest[1:]))
    if name == "submodule" and any(word.pattern == "foreach" for word in rest):
        after = rest[[w.pattern for w in rest].index("foreach") + 1 :]
        found.append(_text(tuple(w for w in after if w.pattern != "--recursive"), "foreach"))
    for index, word in enumerate(rest):
        option, has_value, value = word.pattern.partition("=")
        following = rest[index + 1] if index + 1 < len(rest) else Word("", "")
        runs_text = (name, option) in SCRIPT_OPTIONS or (
            name == "filter-branch" and option.endswith("-filter")
        )
        if runs_text:
            found.append(_text((Word(value, value) if has_value else following,), option))
        elif (name, option[:2]) in SCRIPT_OPTIONS and len(option) > 2:  # -xCMD
            found.append(_text((Word(option[2:], option[2:]),), option[:2]))
        if option == "--output":
            found.append(Runs(writes=(value if has_value else following.shown,)))
    return found


def _text(words: tuple[Word, ...], what: str) -> Runs | Unknown:
    """Shell text git hands to ``sh -c`` (the words joined)."""
    if not words or any(not word.literal for word in words):
        return Unknown(f"git {what} runs text that is only known at run time")
    return Runs(script=" ".join(word.pattern for word in words), shell=Shell.DASH)
