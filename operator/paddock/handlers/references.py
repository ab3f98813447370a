"""Sandboxes by the Workspace, SandboxPolicy and NetworkPolicies they are made from, kept from
the watch of Sandboxes, so that a change to any reaches its sandboxes at once, without a read,
and a shared NetworkPolicy no Sandbox uses any more is known at once.

Not a kopf index: kopf holds every object's worker until all indexes are filled, and with a
bound on its workers below the number of objects the indexes are never filled.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import ValidationError

from paddock.api.sandbox import SandboxSpec
from paddock.policy.choice import choose_policy
from paddock.sandboxes.fence import fences_of

# (kind, namespace, name) of a Workspace, SandboxPolicy or NetworkPolicy a Sandbox uses
Reference = tuple[str, str, str]
Named = tuple[str, str]  # (namespace, name) of a Sandbox


def references_of(body: dict[str, Any], policy_default: str | None) -> set[Reference]:
    """What the Sandbox is made from (nothing when its spec is invalid)."""
    meta = body.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    try:
        spec = SandboxSpec.model_validate(body.get("spec") or {})
    except ValidationError:
        return set()
    found = {("Workspace", namespace, spec.workspace_ref.name)}
    choice = choose_policy(spec, namespace, policy_default)
    if choice.name is not None:
        found.add(("SandboxPolicy", choice.namespace or namespace, choice.name))
    return found | fences_of(choice, namespace, meta.get("name") or "")


class References:
    """Thread-safe: kopf calls event handlers from several workers at once."""

    def __init__(self) -> None:
        self._sandboxes: dict[Reference, set[Named]] = {}
        self._made_from: dict[Named, set[Reference]] = {}
        self._lock = threading.Lock()

    def update(self, sandbox: Named, references: set[Reference]) -> list[Reference]:
        """Record what the Sandbox is made from now: what no Sandbox is made from any more."""
        unused: list[Reference] = []
        with self._lock:
            for reference in self._made_from.pop(sandbox, set()) - references:
                named = self._sandboxes.get(reference, set())
                named.discard(sandbox)
                if not named:
                    self._sandboxes.pop(reference, None)
                    unused.append(reference)
            if references:
                self._made_from[sandbox] = references
            for reference in references:
                self._sandboxes.setdefault(reference, set()).add(sandbox)
        return sorted(unused)

    def forget(self, sandbox: Named) -> list[Reference]:
        return self.update(sandbox, set())

    def all(self) -> list[Named]:
        """Every Sandbox with a valid spec."""
        with self._lock:
            return sorted(self._made_from)

    def sandboxes(self, reference: Reference) -> list[Named]:
        with self._lock:
            return sorted(self._sandboxes.get(reference, ()))
