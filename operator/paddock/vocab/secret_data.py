"""What a Secret's data says to whoever read it: which referenced keys it lacks and what the
others hold. Pure: the Secrets are read by the caller, each once."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

SecretRef = tuple[str, str]  # (Secret, key)
Found = Mapping[str, "dict[str, Any] | None"]  # each Secret read, by name (None: not there)


def missing_keys(secrets: Found, refs: Iterable[SecretRef]) -> list[str]:
    """``"secret/key"`` for each reference that does not resolve (key names only: no value is
    decoded)."""
    missing = []
    for name, key in refs:
        secret = secrets.get(name) or {}
        if key not in (secret.get("data") or {}) | (secret.get("stringData") or {}):
            missing.append(f"{name}/{key}")
    return missing


def values(secrets: Found, refs: Iterable[SecretRef]) -> dict[SecretRef, str]:
    """The decoded values of the references that resolve. For a harness's environment and for
    scrubbing them from events; never logged."""
    found: dict[SecretRef, str] = {}
    for name, key in refs:
        data = (secrets.get(name) or {}).get("data") or {}
        if key in data:
            found[(name, key)] = base64.b64decode(data[key]).decode(errors="replace")
    return found
