"""The operator's ClusterRole grants named verbs on named resources only."""

from __future__ import annotations

import yaml

from support.kube import ROOT


def test_operator_role_has_no_wildcards() -> None:
    role = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())
    assert role["kind"] == "ClusterRole"
    for rule in role["rules"]:
        assert "*" not in rule["verbs"], rule
        assert "*" not in rule["resources"], rule
        assert "*" not in rule["apiGroups"], rule


def test_operator_cannot_write_secrets() -> None:
    role = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())
    for rule in role["rules"]:
        if "secrets" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
