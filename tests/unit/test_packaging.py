"""The package layout: operator/ is a source root that never shadows the stdlib module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stdlib_operator_is_not_shadowed_from_the_repository_root() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import operator, paddock; operator.add; print(operator.__file__)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "/operator/" not in result.stdout.replace(str(ROOT), "<repo>").split("<repo>")[
        -1
    ] or not result.stdout.startswith(str(ROOT))
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "paddock.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith("paddock ")
