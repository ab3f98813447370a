"""What a command runs besides itself, as the engine's readers tell it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from paddock.policy.words import Word


class Shell(StrEnum):
    """The shell that reads a script: bash; dash, the image's ``/bin/sh``, which reads POSIX
    sh only (no brace expansion, no ``$'...'``, none of bash's keywords or arrays); or either
    of them, for a program that runs ``$SHELL`` or ``/bin/sh`` (judged as both)."""

    BASH = "bash"
    DASH = "dash"
    EITHER = "either"


@dataclass(frozen=True)
class Runs:
    """A command run by another: ``words`` as arguments, or ``script`` as shell text (read by
    ``shell``); with the variables the wrapper sets for it (``env A=1``)."""

    words: tuple[Word, ...] = ()
    script: str | None = None
    more_arguments: bool = False  # xargs adds arguments read at run time
    stdin: Word | None = None  # the here-document the wrapped command reads
    stdin_file: bool = False
    environment: tuple[tuple[str, str | None], ...] = ()
    shell: Shell = Shell.BASH
    writes: tuple[str, ...] = ()  # files the wrapper writes itself (strace -o FILE)
    directory: str | None = None  # where it runs the command (env -C DIR; "": not known)


@dataclass(frozen=True)
class Unknown:
    """What runs cannot be told from the text: it could be any command; or, with
    ``program``, some program the command does not name (judged as an unlisted command)."""

    reason: str
    program: bool = False
