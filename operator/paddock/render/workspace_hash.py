"""The workspace hash: a content hash of everything that changes a prepared workspace."""

from __future__ import annotations

import hashlib
import json

from paddock.api.workspace import WorkspaceSpec


def workspace_hash(spec: WorkspaceSpec, image: str) -> str:
    """Hash of the spec (source, setup, scripts, env, instructions, skills, plugins) and the
    image setup runs in.

    The spec holds Secret *references* only, never values, so a rotated secret value leaves
    the hash, and the snapshots taken for it, as they are; renaming a reference changes it.
    """
    canonical = json.dumps(
        {"image": image, "spec": spec.to_api()}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
