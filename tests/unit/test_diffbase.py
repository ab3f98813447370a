"""kopf's record of the last handled spec fits an annotation whatever the spec's size, and
still changes whenever the spec does."""

from __future__ import annotations

import json
from typing import Any

import kopf

from paddock.handlers.diffbase import CompactDiffBaseStorage

ANNOTATIONS_LIMIT = 256 * 1024


def body(content: str) -> kopf.Body:
    raw: dict[str, Any] = {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": "big", "namespace": "team", "annotations": {}},
        "spec": {
            "skills": [
                {"name": f"f{i}", "file": {"path": f"f{i}", "content": content}} for i in range(4)
            ]
        },
    }
    return kopf.Body(raw)


def test_a_large_spec_is_recorded_in_a_few_bytes() -> None:
    storage = CompactDiffBaseStorage(prefix="paddock.dev", key="last-handled-configuration")
    essence = storage.build(body=body("x" * 250_000))
    assert len(json.dumps(essence)) < ANNOTATIONS_LIMIT // 100


def test_any_change_of_a_long_string_changes_the_record() -> None:
    storage = CompactDiffBaseStorage(prefix="paddock.dev", key="last-handled-configuration")
    before = storage.build(body=body("x" * 250_000))
    after = storage.build(body=body("x" * 249_999 + "y"))
    assert before != after
    assert storage.build(body=body("x" * 250_000)) == before


def test_short_values_are_recorded_as_they_are() -> None:
    storage = CompactDiffBaseStorage(prefix="paddock.dev", key="last-handled-configuration")
    essence = storage.build(body=body("hello"))
    assert essence["spec"]["skills"][0]["file"]["content"] == "hello"
