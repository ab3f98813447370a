"""The workspace hash: a content hash of everything that changes a prepared workspace."""

from __future__ import annotations

import hashlib
import json

from paddock.api.workspace import WorkspaceSpec


def workspace_hash(spec: WorkspaceSpec, image: str) -> str:
    """Hash of the spec (source, setup, scripts, env, instructions, skills, plugins) and the
    image setup runs in. Not the routes: they are the gateway's, given to each run, and
    change nothing of a prepared workspace (a Workspace without routes hashes as it did
    before there were any).

    The spec holds Secret *references* only, never values, so a rotated secret value leaves
    the hash, and the snapshots taken for it, as they are; renaming a reference changes it.
    """
    prepared = {k: v for k, v in spec.to_api().items() if k != "routes"}
    canonical = json.dumps(
        {"image": image, "spec": prepared}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
