"""The example manifests and the corpus of bad manifests, loaded for tests of every layer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from paddock.api import KINDS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BAD_MANIFESTS = ROOT / "tests" / "data" / "bad-manifests.yaml"
MODELS = {model.kind_info.kind: model for model in KINDS}


@dataclass(frozen=True)
class BadManifest:
    name: str
    field: str
    message: str
    server: str | None  # None: the API server cannot check it; the operator does
    manifest: dict[str, Any]

    def __str__(self) -> str:
        return self.name


def bad_manifests() -> list[BadManifest]:
    cases = yaml.safe_load(BAD_MANIFESTS.read_text())
    return [
        BadManifest(
            name=case["name"],
            field=case["field"],
            message=case["message"],
            server=case["server"] if "server" in case else case["message"],
            manifest=case["manifest"],
        )
        for case in cases
    ]


def example_manifests() -> list[tuple[Path, dict[str, Any]]]:
    return [
        (path, doc)
        for path in sorted(EXAMPLES.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
