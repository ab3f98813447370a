"""The package layout: operator/ is a source root that never shadows the stdlib module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stdlib_operator_is_not_shadowed_from_the_repository_root() -> None:
    # Run from the repository root, where a directory named operator/ sits on sys.path[0].
    result = subprocess.run(
        [sys.executable, "-c", "import operator, paddock; operator.add; print(operator.__file__)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    module_file = Path(result.stdout.strip())
    assert ROOT not in module_file.parents, f"operator imported from {module_file}"
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "paddock.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith("paddock ")
