"""git's own options before its subcommand: ``git -C dir push`` pushes, and ``git -c
core.pager=CMD log`` runs CMD."""

from __future__ import annotations

from paddock.policy.outcomes import Runs, Unknown
from paddock.policy.words import Word

# Global options followed by a value, and those without one.
VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                    "--super-prefix"})  # fmt: skip
FLAGS = frozenset(
    {"-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects",
     "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
     "--no-optional-locks", "--no-lazy-fetch", "--no-advice"}
)  # fmt: skip
# Configs that run nothing, whatever their value (``git -c user.name=x``).
HARMLESS_KEYS = ("user.", "color.", "advice.", "core.quotepath", "init.defaultbranch",
                 "commit.gpgsign", "log.", "pull.rebase", "diff.noprefix", "column.",
                 "core.autocrlf", "push.default", "merge.conflictstyle", "i18n.")  # fmt: skip
# Options that point git at another repository's config, or at the programs it runs.
ELSEWHERE = ("--git-dir", "--exec-path=")


def subcommand(words: tuple[Word, ...]) -> tuple[Word, ...] | None:
    """``git SUBCOMMAND ...`` without the global options before it, or None when they are
    not all known (then only the command as written is matched)."""
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
    """What git's own options make run that cannot be told: a config that may name a program,
    another repository's config, another directory of git's programs."""
    for index, word in enumerate(args):
        if not word.literal or not word.pattern.startswith("-"):
            break
        if word.pattern.startswith(ELSEWHERE):
            return [Unknown(f"git {word.pattern} runs what another directory holds")]
        setting = None
        if word.pattern in ("-c", "--config-env") and index + 1 < len(args):
            setting = args[index + 1]
        elif word.pattern.startswith(("-c", "--config-env=")):
            text = word.pattern.removeprefix("--config-env=").removeprefix("-c")
            setting = Word(text, text)
        if setting is None:
            continue
        key = setting.pattern.partition("=")[0].lower()
        if not setting.literal or not key.startswith(HARMLESS_KEYS):
            what = f"git {word.pattern} {setting.shown}"
            return [Unknown(f"{what} sets a config that may run a program")]
    return None
