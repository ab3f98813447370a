"""The committed CRDs are what the models generate, and they are structural."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from paddock.api import KINDS
from paddock.api.crd import render_crd
from paddock.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_committed_crds_match_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["crds", "--check", "--dir", str(ROOT / "crds"), "--chart", str(ROOT / "charts/paddock")]
    assert main(args) == 0, capsys.readouterr().err


@pytest.mark.parametrize("stale", ["crds/paddock.dev_sandboxes.yaml",
                                   "chart/templates/crds/paddock.dev_sandboxes.yaml"])  # fmt: skip
def test_check_fails_on_a_stale_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stale: str
) -> None:
    args = ["crds", "--dir", str(tmp_path / "crds"), "--chart", str(tmp_path / "chart")]
    main(args)
    target = tmp_path / stale
    target.write_text(target.read_text().replace("Sandbox", "Sandbux"))
    assert main([*args, "--check"]) == 1
    assert stale in capsys.readouterr().err


def test_chart_crds_are_kept_on_uninstall_and_behind_the_toggle() -> None:
    for path in (ROOT / "charts/paddock/templates/crds").glob("*.yaml"):
        text = path.read_text()
        assert "{{- if .Values.crds.enabled }}" in text
        assert "helm.sh/resource-policy: keep" in text


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.__name__)
def test_schema_is_structural(model: Any) -> None:
    crd = render_crd(model)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "$ref" not in yaml.safe_dump(schema)
    for path, node in _nodes(schema):
        assert "anyOf" not in node, path
        assert "title" not in node, path
        typed = (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        )
        assert typed, f"{model.__name__}{path} has no type"
        is_spec_field = path.startswith(".spec") and not path.endswith(("[]", "{}"))
        assert "description" in node or not is_spec_field, f"{model.__name__}{path}: no description"


@pytest.mark.parametrize(
    ("model", "short_name", "columns"),
    [
        (KINDS[0], "ws", ["Source", "Hash", "Ready", "Age"]),
        (KINDS[1], "sbxpol", ["Default", "Network", "Age"]),
        (
            KINDS[2],
            "sbx",
            ["Phase", "Workspace", "Ready", "Policy", "Restored", "Pod", "Message", "Age"],
        ),
        (
            KINDS[3],
            "sbxpool",
            ["Desired", "Ready", "Claimed", "Workspace", "Age"],
        ),
        (
            KINDS[4],
            "run",
            [
                "Phase",
                "Harness",
                "Sandbox",
                "Events",
                "Approvals",
                "Tokens",
                "Cost",
                "Session",
                "Message",
                "Age",
            ],
        ),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_names_and_printer_columns(model: Any, short_name: str, columns: list[str]) -> None:
    spec = render_crd(model)["spec"]
    assert spec["names"]["shortNames"] == [short_name]
    assert spec["names"]["categories"] == ["paddock"]
    version = spec["versions"][0]
    assert version["subresources"]["status"] == {}
    assert ("scale" in version["subresources"]) == (model.kind_info.kind == "SandboxPool")
    assert [c["name"] for c in version["additionalPrinterColumns"]] == columns


def test_cross_field_rules_are_cel_validations() -> None:
    spec = render_crd(KINDS[4])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    messages = [v["message"] for v in spec["spec"]["x-kubernetes-validations"]]
    assert "set exactly one of sandboxRef, sandboxTemplate or poolRef" in messages
    assert "command is required when harness is command, and only then" in messages
