"""A workspace's repository as a hostile agent leaves it: every place git takes configuration
from that its user may write (the repository's config and hooks, the user's global and XDG
config, an included file, ``.gitattributes`` and ``info/attributes``) names a program, for
every setting that names one; and settings that would hide work from a record. A program
that runs leaves a mark named after its setting in ``marks``."""

from __future__ import annotations

import stat
from pathlib import Path

# Settings whose value git runs (through a shell, or as a program with arguments).
PROGRAMS = (
    "core.fsmonitor", "core.pager", "core.editor", "core.askPass", "core.sshCommand",
    "core.alternateRefsCommand", "sequence.editor", "diff.external", "pager.status",
    "pager.diff", "credential.helper", "gpg.program", "gpg.ssh.program", "gpg.x509.program",
    "filter.evil.clean", "filter.evil.smudge", "filter.evil.process", "diff.evil.textconv",
    "diff.evil.command", "merge.evil.driver", "uploadpack.packObjectsHook",
    "remote.origin.uploadpack", "remote.origin.receivepack",
)  # fmt: skip
# Settings that make git run one of the above, or hide work from what git reports.
SWITCHES = {
    "commit.gpgSign": "true",
    "status.showUntrackedFiles": "no",
    "diff.noprefix": "true",
    "core.fsmonitorHookVersion": "2",
    "core.untrackedCache": "true",
    "gc.auto": "1",
}
HOOKS = (
    "pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-index-change",
    "reference-transaction", "pre-auto-gc", "post-checkout", "post-rewrite", "fsmonitor-watchman",
    "pre-push", "post-update",
)  # fmt: skip
ATTRIBUTES = "* filter=evil diff=evil merge=evil\n"


def _program(path: Path, marks: Path, name: str) -> Path:
    path.write_text(f'#!/bin/sh\ntouch "{marks}/{name}"\ncat\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _config(path: Path, marks: Path, where: str, programs: Path) -> None:
    """A config file (its sections written by hand, as an agent's ``echo`` would) naming a
    program of its own for each setting, with the switches."""
    lines = []
    for key in PROGRAMS:
        section, _, name = key.rpartition(".")
        head, _, sub = section.partition(".")
        program = _program(programs / f"{where}-{key}", marks, f"{where}-{key}")
        lines.append(f'[{head} "{sub}"]' if sub else f"[{head}]")
        lines.append(f"\t{name} = {program}")
    for key, value in SWITCHES.items():
        head, _, name = key.partition(".")
        lines += [f"[{head}]", f"\t{name} = {value}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write("\n".join(lines) + "\n")


def arm(workspace: Path, home: Path, marks: Path) -> None:
    """Make ``workspace``'s repository (and ``home``'s git config) name a program at every
    place git takes one from. ``marks`` is where a program that ran leaves its mark."""
    marks.mkdir(parents=True, exist_ok=True)
    programs = marks.parent / "programs"
    programs.mkdir(exist_ok=True)
    repo = workspace / ".git"
    _config(repo / "config", marks, "repo", programs)
    _config(home / ".gitconfig", marks, "global", programs)
    _config(home / ".config" / "git" / "config", marks, "xdg", programs)
    included = programs / "included.gitconfig"
    _config(included, marks, "included", programs)
    hooks = programs / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in HOOKS:
        _program(repo / "hooks" / hook, marks, f"hook-{hook}")
        _program(hooks / hook, marks, f"hooks-path-{hook}")
    with (repo / "config").open("a") as out:
        out.write(f"[include]\n\tpath = {included}\n[core]\n\thooksPath = {hooks}\n")
    (repo / "info").mkdir(exist_ok=True)
    (repo / "info" / "attributes").write_text(ATTRIBUTES)
    (workspace / ".gitattributes").write_text(ATTRIBUTES)


def ran(marks: Path) -> list[str]:
    """The settings and hooks whose program ran."""
    return sorted(p.name for p in marks.iterdir())
