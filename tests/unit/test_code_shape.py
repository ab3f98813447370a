"""The operator's code stays readable in an afternoon. Every package is on a floor of the one
layers contract (pyproject.toml) and in the README's layout. No module is over 400 lines and no
function over 60 (the local cluster's tooling, devtools/, is not the operator and is exempt):
a module that grows past that holds two ideas (STYLE.md), and is split by what each does, not
packed to fit."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "paddock"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _parts() -> set[str]:
    """The package's packages and top-level modules."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    return packages | modules


def test_every_package_is_on_a_floor_of_the_one_plan() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    placed = {name for floor in layers["layers"] for name in re.split(r"[|:]", floor)}
    assert {name.strip() for name in placed} == _parts()


def test_every_package_is_in_the_readmes_layout() -> None:
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"^ {2}(\w+)/", layout, re.M))
    named |= {m for line in re.findall(r"^ {2}(\w+\.py.*)$", layout, re.M)
              for m in re.findall(r"(\w+)\.py", line)}  # fmt: skip
    assert _parts() <= named, sorted(_parts() - named)


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, "each holds two ideas: split it by what each part does"


def test_no_function_is_over_60_lines() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.name}"] = lines
    assert long == {}
