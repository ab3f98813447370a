"""A Workspace's files ConfigMaps: which of them may go (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from paddock.sandboxes.workspace import unused_files

Obj = dict[str, Any]


def configmap(name: str, owner: str = "ws-uid") -> Obj:
    refs = [{"kind": "Workspace", "uid": owner, "controller": True}]
    return {"kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": refs}}


def mounting(name: str) -> Obj:
    return {"kind": "Pod", "spec": {"volumes": [{"name": "files", "configMap": {"name": name}}]}}


CASES = {
    "the current one stays, mounted or not": ([configmap("now")], [], []),
    "an earlier one no pod mounts goes": ([configmap("old")], [], ["old"]),
    "an earlier one a pod mounts stays": ([configmap("old")], [mounting("old")], []),
    "another Workspace's of the name stays": ([configmap("old", owner="x")], [], []),
    "only the unmounted of two earlier ones": (
        [configmap("old"), configmap("older")],
        [mounting("old"), {"kind": "Pod", "spec": {}}],
        ["older"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_only_an_earlier_unmounted_files_configmap_of_the_workspace_goes(case: str) -> None:
    configmaps, pods, gone = CASES[case]
    unused = unused_files(configmaps, "now", pods, "ws-uid")
    assert [c["metadata"]["name"] for c in unused] == gone
