"""What the docs name exists in the code: every condition reason, phase and condition type they
quote, every metric label value of the README's table, every approval kind. A doc that names
something the code does not have (or no longer has) fails here, not in a user's alert rule."""

from __future__ import annotations

import ast
import enum
import inspect
import re
from pathlib import Path

from paddock import metrics
from paddock.api import agentrun, reasons, sandbox
from paddock.api.agentrun import AgentRun, Harness, RunPhase
from paddock.api.policy import Decision, SandboxPolicy
from paddock.api.sandbox import Sandbox
from paddock.api.workspace import Workspace
from paddock.policy.engine import PartKind
from support.kube import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPERATOR = ROOT / "operator" / "paddock"

# CamelCase names the docs quote that belong to other programs: Kubernetes, the kubelet and
# CSI, S3, kopf, Claude Code's tools, Flux.
FOREIGN = {
    "ErrImagePull", "ExternalIP", "InternalIP", "KopfRunner", "NodePublishVolume",
    "RuntimeDefault", "SignatureDoesNotMatch", "WaitForFirstConsumer", "MultiEdit",
    "NotebookEdit", "WebFetch", "WebSearch", "AbortIncompleteMultipartUpload",
    "HealthCheckFailed",
}  # fmt: skip


def _enum_values(*modules: object) -> set[str]:
    return {
        str(member.value)
        for module in modules
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, enum.Enum)
        for member in obj
    }


def _string_literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _operator_literals() -> set[str]:
    found: set[str] = set()
    for path in OPERATOR.rglob("*.py"):
        found |= _string_literals(path)
    return found


def _quoted(pattern: str) -> dict[str, list[str]]:
    """Each backticked word of the docs matching ``pattern``, with the files that quote it."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for match in re.finditer(rf"`({pattern})`", doc.read_text()):
            found.setdefault(match.group(1), []).append(doc.name)
    return found


def test_every_reason_phase_and_condition_the_docs_quote_is_in_the_code() -> None:
    kinds = {m.kind_info.kind for m in (Workspace, SandboxPolicy, Sandbox, AgentRun)}
    known = _enum_values(reasons, agentrun, sandbox) | kinds | FOREIGN
    known |= {
        s for s in _operator_literals() if re.fullmatch(r"[A-Z][a-z0-9]+([A-Z][a-z0-9]*)+", s)
    }
    quoted = _quoted(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+")
    unknown = {name: files for name, files in quoted.items() if name not in known}
    assert not unknown, f"named in docs, absent from the code: {unknown}"


def _metric_table() -> dict[str, dict[str, list[str]]]:
    """The README's metrics table: metric -> label -> the values it lists (may be none)."""
    table: dict[str, dict[str, list[str]]] = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        row = re.match(r"\| `(paddock_[a-z_]+)` \| \w+ \| ([^|]*) \|", line)
        if row:
            labels = re.findall(r"`(\w+)`(?: \(([^)]*)\))?", row.group(2))
            table[row.group(1)] = {
                name: [v for v in values.split(", ") if v] for name, values in labels
            }
    return table


def _policy_sources_counted() -> set[str]:
    """The ``source`` of each ``metrics.policy_decided`` call in the operator's code: the values
    something increments, not only those declared."""
    sources: set[str] = set()
    for path in OPERATOR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "policy_decided"
                and isinstance(node.args[-1], ast.Constant)
            ):
                sources.add(node.args[-1].value)
    return sources


def test_every_metric_label_value_of_the_readme_is_one_the_code_reports() -> None:
    table = _metric_table()
    assert "paddock_policy_decisions_total" in table, "the README has no metrics table"
    literals = _string_literals(OPERATOR / "metrics.py") | _operator_literals()
    exact = {
        "decision": {str(d.value) for d in Decision},
        "source": _policy_sources_counted(),
        "harness": {str(h.value) for h in Harness},
        "phase": {str(p.value) for p in RunPhase} | _enum_values(sandbox),
    }
    assert exact["source"] == set(metrics.POLICY_SOURCES), "a declared source nothing counts"
    wrong = {
        (metric, label, value)
        for metric, labels in table.items()
        for label, values in labels.items()
        for value in values
        if value not in exact.get(label, literals)
    }
    assert not wrong, f"label values the README lists that the code never reports: {wrong}"


def test_every_approval_kind_the_docs_name_is_one_the_gate_asks_with() -> None:
    named = set(re.findall(r"kind `([a-z-]+)`", " ".join(d.read_text() for d in DOCS)))
    described = agentrun.Approval.model_fields["kind"].description or ""
    kinds = {str(k.value) for k in PartKind if k != PartKind.SYNTAX}
    assert named <= kinds, named - kinds
    assert all(kind in described for kind in kinds), described
