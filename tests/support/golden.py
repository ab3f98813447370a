"""Golden files: compare rendered output with a committed file; PADDOCK_UPDATE_GOLDEN=1
rewrites the files instead (then review the diff before committing it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "unit" / "golden"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (scripts, files) as literal blocks, so a golden diff reads well."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not value.endswith(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def assert_golden(name: str, rendered: Any) -> None:
    text = (
        rendered
        if isinstance(rendered, str)
        else yaml.dump(rendered, Dumper=_Dumper, sort_keys=False, width=100)
    )
    path = GOLDEN_DIR / name
    if os.environ.get("PADDOCK_UPDATE_GOLDEN") == "1":
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing; run with PADDOCK_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"rendered output differs from {path}"
