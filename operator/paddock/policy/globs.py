"""Policy globs: anchored, ``*`` matches any text (spaces and slashes too), everything else
matches itself; a glob ending in `` *`` also matches the text without its last word (``git
diff *`` matches ``git diff``). Matching is linear in the text, whatever the glob: no
backtracking. And the texts a command is matched as: as written, by its bare name, git's
subcommand, and with each choice of its words that may expand to none gone."""

from __future__ import annotations

import itertools

from paddock.policy import git
from paddock.policy.shell import DYNAMIC, Word

STAR = "*"
MAX_VANISHING = 6  # words of one command that may expand to none: each choice is matched


def always_matches(glob: str, pattern: str) -> bool:
    """Whether the glob matches the command whatever its run-time parts turn out to be: a
    DYNAMIC mark in ``pattern`` is only ever covered by a ``*`` of the glob."""
    return any(_matches(whole.split(STAR), pattern) for whole in _wholes(glob))


def could_match(glob: str, pattern: str) -> bool:
    """Whether the glob matches the command for some value of its run-time parts."""
    return any(_could_match(whole, pattern) for whole in _wholes(glob))


def _wholes(glob: str) -> tuple[str, ...]:
    """The glob, and without a last `` *`` (which matches no words at all, too)."""
    return (glob, glob.removesuffix(" *")) if glob.endswith(" *") else (glob,)


def _could_match(glob: str, pattern: str) -> bool:
    if DYNAMIC not in pattern:
        return _matches(glob.split(STAR), pattern)
    if STAR not in glob:
        return _matches(pattern.split(DYNAMIC), glob)
    # Both have a wildcard: they share a text exactly when their fixed starts agree (one is a
    # prefix of the other) and their fixed ends agree; the middles fit between the wildcards.
    glob_parts, pattern_parts = glob.split(STAR), pattern.split(DYNAMIC)
    start, other_start = glob_parts[0], pattern_parts[0]
    end, other_end = glob_parts[-1], pattern_parts[-1]
    starts = start.startswith(other_start) or other_start.startswith(start)
    ends = end.endswith(other_end) or other_end.endswith(end)
    return starts and ends


def _matches(parts: list[str], text: str) -> bool:
    """``parts`` are the fixed pieces between wildcards, in order."""
    if len(parts) == 1:
        return text == parts[0]
    first, *middle, last = parts
    if len(text) < len(first) + len(last) or not text.startswith(first):
        return False
    if not text.endswith(last):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def joined(words: tuple[Word, ...]) -> str:
    return " ".join(word.pattern for word in words)


def forms(words: tuple[Word, ...]) -> list[str]:
    """The texts a deny or ask rule is matched against: as written, by the bare name, and
    ``git``'s subcommand without git's own options (``git -C dir push`` is ``git push``)."""
    written = joined(words)
    bare = " ".join((words[0].pattern.rsplit("/", 1)[-1], *(w.pattern for w in words[1:])))
    forms = [written, bare]
    if bare.startswith(("git ", git.DASHED)):
        subcommand = git.subcommand(words)
        forms += [" ".join(("git", *(w.pattern for w in subcommand[1:])))] if subcommand else []
    return forms


def vanishing(words: tuple[Word, ...]) -> list[tuple[Word, ...]] | None:
    """The command's words for each choice among those that may expand to no word at all (an
    unquoted ``$X``, ``"$@"``, the arguments xargs reads, a glob under ``nullglob``), gone or
    not; None past MAX_VANISHING of them."""
    could_go = [
        i
        for i, w in enumerate(words)
        if i and (w.expands or (w.splits and not w.pattern.replace(DYNAMIC, "")))
    ]
    if len(could_go) > MAX_VANISHING:
        return None
    return [
        tuple(word for i, word in enumerate(words) if i not in gone)
        for size in range(len(could_go) + 1)
        for gone in itertools.combinations(could_go, size)
    ]
