"""Where a sandbox runs when its spec does not say: the operator's placement (a platform's
node pool for agents: its labels, its taint's toleration, its StorageClass) fills what the
Sandbox leaves unset, never what it sets, and reaches the pod and the claim the reconcile
renders. (The chart renders these settings in tests/integration/test_chart.py; the chart's
sandboxes land on the local cluster's real node by them in tests/e2e/test_chart_install.py.)"""

from __future__ import annotations

import json
from typing import Any

from paddock.api.sandbox import SandboxSpec
from paddock.sandboxes.inputs import placed
from paddock.sandboxes.plan import Loaded
from paddock.settings import OperatorSettings

ENV = {
    "PADDOCK_SANDBOX_NODE_SELECTOR": "pool=agents",
    "PADDOCK_SANDBOX_TOLERATIONS": json.dumps(
        [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}]
    ),
    "PADDOCK_SANDBOX_STORAGE_CLASS": "fast",
}


def _loaded(**spec: Any) -> Loaded[SandboxSpec]:
    return Loaded("box", SandboxSpec.model_validate({"workspaceRef": {"name": "app"}, **spec}))


def test_the_operators_placement_fills_what_the_sandbox_leaves_unset() -> None:
    config = OperatorSettings.from_env(ENV)
    spec = placed(_loaded(), config).spec
    assert spec is not None
    assert spec.node_selector == {"pool": "agents"}
    assert [t.to_api() for t in spec.tolerations] == [
        {"key": "agents", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec.storage.storage_class_name == "fast"
    assert spec.storage.size == "10Gi"  # the rest of the spec is its own


def test_what_the_sandbox_says_wins_field_by_field() -> None:
    config = OperatorSettings.from_env(ENV)
    own = _loaded(
        nodeSelector={"gpu": "yes"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        storage={"size": "1Gi", "storageClassName": "slow"},
    )
    spec = placed(own, config).spec
    assert spec is not None
    assert spec.node_selector == {"gpu": "yes"}
    assert [t.key for t in spec.tolerations] == ["gpu"]
    assert spec.storage.storage_class_name == "slow"
    # A sandbox that places itself in any way gets none of the operator's placement (half of
    # it would select nodes it does not tolerate); its volume still gets the class.
    for own in ({"nodeSelector": {"gpu": "yes"}}, {"tolerations": [{"key": "gpu"}]},
                {"affinity": {"nodeAffinity": {}}}):  # fmt: skip
        partly = placed(_loaded(**own), config).spec
        assert partly is not None
        assert partly.node_selector == own.get("nodeSelector", {})
        assert [t.key for t in partly.tolerations] == [t["key"] for t in own.get("tolerations", [])]
        assert partly.storage.storage_class_name == "fast"


def test_without_a_placement_or_a_valid_spec_nothing_changes() -> None:
    bare = _loaded()
    assert placed(bare, OperatorSettings()) is bare
    invalid: Loaded[SandboxSpec] = Loaded("box", None, "the spec is invalid")
    assert placed(invalid, OperatorSettings.from_env(ENV)) is invalid
