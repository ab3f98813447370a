"""The API models accept the examples and reject bad input with a message naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from paddock.api import AgentRun, Workspace
from paddock.api.errors import ManifestError, validate
from paddock.api.fields import (
    parse_duration,
)
from support.manifests import MODELS, BadManifest, bad_manifests, example_manifests


@pytest.mark.parametrize(("path", "doc"), example_manifests(), ids=lambda v: getattr(v, "name", ""))
def test_examples_are_valid(path: Path, doc: dict[str, Any]) -> None:
    validate(MODELS[doc["kind"]], doc)


@pytest.mark.parametrize("case", bad_manifests(), ids=str)
def test_bad_manifest_is_rejected_naming_the_field(case: BadManifest) -> None:
    with pytest.raises(ManifestError) as caught:
        validate(MODELS[case.manifest["kind"]], case.manifest)
    lines = caught.value.errors
    matching = [line for line in lines if line.startswith(f"{case.field}: ")]
    assert matching, f"no error names {case.field}: {lines}"
    assert any(case.message in line for line in matching), lines


def test_examples_cover_every_kind() -> None:
    assert {doc["kind"] for _, doc in example_manifests()} == set(MODELS)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800)]
)
def test_duration_accepts_one_number_and_one_unit(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "0s", "90", "1.5h", "1h30m", "2w", "-5m", " 5m", "5M", "m"])
def test_duration_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="must be a duration"):
        parse_duration(text)


def test_defaults_are_filled_in() -> None:
    ws = Workspace.model_validate({"spec": {"source": {"git": {"url": "https://e.com/r.git"}}}})
    assert ws.spec.source is not None
    assert ws.spec.source.git is not None
    assert ws.spec.source.git.depth == 1
    assert ws.spec.setup_step_timeout == "30m"
    run = AgentRun.model_validate(
        {
            "spec": {
                "sandboxTemplate": {"workspaceRef": {"name": "w"}},
                "harness": "codex",
                "prompt": "hi",
                "threadId": "t1",
            }
        }
    )
    assert run.spec.timeout == "1h"
    assert run.spec.effective_reuse == "thread"
    template = run.spec.sandbox_template
    assert template is not None
    assert template.lifecycle.snapshot == "after-setup"
    assert template.lifecycle.snapshot_max_age == "24h"


def test_full_clone_depth_is_accepted() -> None:
    ws = Workspace.model_validate(
        {"spec": {"source": {"git": {"url": "https://e.com/r.git", "depth": "full"}}}}
    )
    assert ws.spec.source is not None
    assert ws.spec.source.git is not None
    assert ws.spec.source.git.depth == "full"


def test_setup_steps_keep_their_shapes() -> None:
    ws = Workspace.model_validate(
        {"spec": {"setup": ["cd app", {"run": "make", "timeout": "5m"}, {"parallel": ["a", "b"]}]}}
    )
    assert [type(step).__name__ for step in ws.spec.setup] == [
        "str",
        "SetupCommand",
        "ParallelGroup",
    ]


def test_to_api_round_trips_in_camel_case() -> None:
    doc = {"spec": {"sandboxRef": {"name": "s"}, "harness": "command", "command": "ls"}}
    api = AgentRun.model_validate(doc).to_api()
    assert api["spec"]["sandboxRef"] == {"name": "s"}
    assert AgentRun.model_validate(api) == AgentRun.model_validate(doc)
