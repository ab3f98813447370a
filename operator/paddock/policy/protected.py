"""Places no command or file tool of an agent may write into, whatever
``capabilities.fileWrite`` says: Paddock's own (under ``/paddock``: the run's journals, its
read-only control directory), where each CLI reads its hooks, settings, plugins or code from
(in the sandbox's ``$HOME``, and the workspace's ``.gemini/``, which Gemini CLI reads in the
trusted workspace its hooks need), and the shell's startup files (Claude Code's shell sources
``~/.bashrc``; a login shell ``~/.profile``). Defence in depth: what decides is out of the
agent's reach anyway (the sidecar's, and read-only mounts); the engine reads a redirection's
target as written (a relative one from each directory the command may ``cd`` to), so a
target it cannot resolve (``> "$f"``, or after ``cd "$d"``), a link, or a program that
writes files itself is not caught here."""

from __future__ import annotations

import fnmatch
import posixpath
import re

HOME = "/home/paddock"  # the sandbox container's HOME
WORKSPACE = "/workspace"
# What a reference to these variables names in a sandbox (PADDOCK_RUN: any run's directory).
KNOWN = {
    "PADDOCK_RUN": "/paddock/run/_",
    "PADDOCK_CONTROL": "/paddock/control/runs/_",
    "HOME": HOME,
    "PADDOCK_WORKSPACE": WORKSPACE,
    # Each CLI's configuration home is the run's own (harness.base.own_home).
    "CODEX_HOME": "/paddock/run/_/home/codex",
    "GEMINI_CLI_HOME": "/paddock/run/_/home/gemini",
    "CLAUDE_CONFIG_DIR": "/paddock/run/_/home/claude",
    "XDG_CONFIG_HOME": f"{HOME}/.config",
}
SHELL_STARTUP = (".bashrc", ".bash_profile", ".bash_login", ".profile", ".bash_logout")
PLACES = {
    "/paddock": "Paddock's run and control directories",
    f"{HOME}/.claude": "Claude Code's user settings",
    f"{HOME}/.codex": "Codex's home",
    f"{HOME}/.gemini": "Gemini CLI's user settings",
    f"{WORKSPACE}/.gemini": "Gemini CLI's workspace settings and .env",
    f"{HOME}/.config/opencode": "OpenCode's config and plugins",
    f"{HOME}/.opencode": "OpenCode's config",
    f"{HOME}/.local/share/opencode": "OpenCode's data and the programs it downloads",
    **{f"{HOME}/{name}": "the shell's startup files" for name in SHELL_STARTUP},
}
# $NAME, ${NAME} or ${NAME<operator>...}.
_VARIABLE = re.compile(r"\$(?:\{(\w+)([^}]*)\}|(\w+))")
# What names the directory the shell is in (or was in): a path from there.
CURRENT = frozenset({"~+", "~-", "PWD", "OLDPWD"})
USER = "paddock"  # the sandbox's user: ~paddock is HOME
_GLOB = frozenset("*?[")


def protected_place(
    target: str, *, literal: bool = False, directories: tuple[str, ...] = (WORKSPACE,)
) -> str | None:
    """What protected place the path ``target`` (as written, quotes removed) names, if any,
    a relative one from any of ``directories``. ``literal``: a file tool's path (a Write's, a
    patch's), which no shell expands: read both as it is and as a shell word would be (``~``,
    a variable), whichever names a place."""
    paths = {_resolved(target, base) for base in directories}
    paths.add(_normal(target) if literal else None)
    for path in filter(None, paths):
        for place, what in PLACES.items():
            if _names(path, place):
                return what
    return None


def relative(target: str) -> bool:
    """Whether the path is read from the directory the shell is in."""
    found = _VARIABLE.match(target)
    if found:
        return (found.group(1) or found.group(3)) in CURRENT
    return not target.startswith(("/", "~")) or target.split("/", 1)[0] in CURRENT


def directory(target: str, base: str) -> str | None:
    """Where ``cd TARGET`` goes from ``base``, where it can be told (a literal path, ``~``,
    the known variables)."""
    return _resolved(target, base)


def _names(path: str, place: str) -> bool:
    """Whether the path is the place or in it; a glob (bash globs a redirection's target
    that matches one file), whether it may match it or a path in it."""
    if path == place or path.startswith(place + "/"):
        return True
    if not _GLOB & set(path):
        return False
    parts = path.split("/")
    return any(
        fnmatch.fnmatchcase(place, "/".join(parts[:end])) for end in range(2, len(parts) + 1)
    )


def _normal(target: str, base: str = WORKSPACE) -> str:
    """An absolute path as the kernel reads it: relative to ``base``, ``.`` and ``..`` gone,
    and a leading ``//`` one ``/`` (``posixpath.normpath`` keeps two)."""
    path = posixpath.normpath(posixpath.join(base, target))
    return "/" + path.lstrip("/")


def _resolved(target: str, base: str = WORKSPACE) -> str | None:
    """``target`` as an absolute path, where it can be told (``~``, the known variables, a
    path relative to ``base``), or a glob where a part of it cannot (``$X/.bashrc`` is
    ``*/.bashrc``, which may name one); None where a command substitution decides it."""
    first, _, rest = target.partition("/")
    if first in ("~", f"~{USER}"):
        target = "/".join((HOME, rest)) if rest else HOME
    elif first in CURRENT:
        target = "/".join((".", rest))
    target = _VARIABLE.sub(lambda found: _value(found, base), target)
    if "$" in target or "`" in target:
        return None
    return target if target.startswith("*") else _normal(target, base)


def _value(found: re.Match[str], base: str) -> str:
    """A variable's value: the known ones' (the directory it is in for $PWD); any text for
    another, or one changed by an operator (``${HOME%/paddock}``)."""
    name, operator = found.group(1) or found.group(3), found.group(2)
    if operator:
        return "*"
    return base if name in CURRENT else KNOWN.get(name, "*")
