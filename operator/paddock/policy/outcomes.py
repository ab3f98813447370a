"""What a command runs besides itself, as the engine's readers tell it."""

from __future__ import annotations

from dataclasses import dataclass

from paddock.policy.words import Word


@dataclass(frozen=True)
class Runs:
    """A command run by another: ``words`` as arguments, or ``script`` as shell text; with
    the variables the wrapper sets for it (``env A=1``)."""

    words: tuple[Word, ...] = ()
    script: str | None = None
    more_arguments: bool = False  # xargs adds arguments read at run time
    stdin: Word | None = None  # the here-document the wrapped command reads
    stdin_file: bool = False
    environment: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class Unknown:
    """What runs cannot be told from the text: it could be any command; or, with
    ``program``, some program the command does not name (judged as an unlisted command)."""

    reason: str
    program: bool = False
