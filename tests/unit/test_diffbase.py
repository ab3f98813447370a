"""kopf's record of the last handled spec fits an annotation whatever the spec's size, and
still changes whenever the spec does."""

from __future__ import annotations

import json
from typing import Any

import kopf

import paddock.handlers  # noqa: F401  (registers the handlers)
from paddock.handlers.diffbase import RECORDED, CompactDiffBaseStorage

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


def test_an_unrecorded_kind_is_never_written_and_reads_as_unchanged() -> None:
    storage = CompactDiffBaseStorage(prefix="paddock.dev", key="last-handled-configuration")
    run = kopf.Body({"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
                     "metadata": {"name": "r", "namespace": "team", "annotations": {}},
                     "spec": {"harness": "command", "command": "true"}})  # fmt: skip
    patch = kopf.Patch()
    storage.store(body=run, patch=patch, essence=storage.build(body=run))
    assert not patch
    assert storage.fetch(body=run) == storage.build(body=run)
    workspace = body("x")
    storage.store(body=workspace, patch=patch, essence=storage.build(body=workspace))
    assert patch  # (a kind with change handlers is recorded)


def test_every_kind_whose_handlers_act_on_a_change_is_recorded() -> None:
    plurals = {
        "Workspace": "workspaces",
        "SandboxPolicy": "sandboxpolicies",
        "Sandbox": "sandboxes",
    }
    recorded = {plurals[kind] for kind in RECORDED}
    registry = kopf.get_default_registry()
    acting = {
        handler.selector.any_name
        for handler in registry._changing.get_all_handlers()
        if handler.selector is not None and handler.reason != kopf.Reason.DELETE
    }
    acting |= {
        handler.selector.any_name
        for handler in registry._spawning.get_all_handlers()
        if handler.selector is not None and getattr(handler, "interval", None)  # timers
    }
    assert acting == recorded


def test_the_record_of_any_other_kind_is_empty_and_a_recorded_one_keeps_no_status() -> None:
    storage = CompactDiffBaseStorage(prefix="paddock.dev", key="last-handled-configuration")
    pod = kopf.Body({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": []}, "status": {"phase": "Running"}})  # fmt: skip
    assert storage.build(body=pod) == {}
    assert storage.fetch(body=pod) == {}
    meta = {"name": "s", "labels": {"a": "b"}, "managedFields": [{}]}
    spec = {"workspaceRef": {"name": "w"}}
    sandbox = kopf.Body({"apiVersion": "paddock.dev/v1alpha1", "kind": "Sandbox", "metadata": meta,
                         "spec": spec, "status": {"phase": "Ready"}})  # fmt: skip
    assert storage.build(body=sandbox) == {
        "spec": {"workspaceRef": {"name": "w"}},
        "metadata": {"labels": {"a": "b"}},
    }
