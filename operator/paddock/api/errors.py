"""Validation errors as sentences that name the field, for conditions, Events and the CLI."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

# pydantic adds the union member or validator that failed to an error's location; a person
# wants the field, not those internals.
M = TypeVar("M", bound=BaseModel)

_INTERNAL_LOC_PARTS = {"str", "int", "function-after", "function-plain", "lax-or-strict"}


def field_path(loc: tuple[int | str, ...]) -> str:
    """``('spec', 'setup', 0, 'run')`` -> ``spec.setup[0].run``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in _INTERNAL_LOC_PARTS or part[:1].isupper() or "[" in part:
            continue  # a union member such as 'SetupCommand' or 'function-after[...]'
        else:
            path += f".{part}" if path else part
    return path


def _message(error: Any) -> str:
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        return "unknown field"
    return message.removeprefix("Value error, ")


def describe(exc: ValidationError) -> list[str]:
    """One ``field: message`` line per error, without duplicates."""
    lines: list[str] = []
    for error in exc.errors():
        line = f"{field_path(error['loc']) or '(object)'}: {_message(error)}"
        if line not in lines:
            lines.append(line)
    return lines


class ManifestError(ValueError):
    """A manifest the models reject; ``errors`` holds one ``field: message`` line per error."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def validate(model: type[M], document: dict[str, Any]) -> M:
    """Validate a manifest, raising ManifestError that names every bad field."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise ManifestError(describe(exc)) from None
