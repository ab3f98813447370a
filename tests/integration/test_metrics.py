"""The operator's Prometheus endpoint, scraped while it works: counters and gauges move as a
Sandbox is reconciled and a run writes its log."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.kube import Cluster
from support.runs import command_run, wait_for_run
from support.sandboxes import ready_sandbox
from support.waiting import wait_for

pytestmark = pytest.mark.integration


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310  (a local test URL)
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_move_as_a_sandbox_is_reconciled_and_a_run_logs(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    before = scrape(operator.metrics_url)
    ready_sandbox(cluster, namespace, "box")
    cold = "paddock_sandbox_ready_seconds_count"
    # The gauge and the histogram move when the operator's watch shows it Ready, which may be
    # a moment after kubectl does.
    after = wait_for(
        lambda: (
            (s := scrape(operator.metrics_url))
            and value(s, "paddock_sandboxes", phase="Ready") >= 1
            and value(s, cold, start="cold") > value(before, cold, start="cold")
            and s
        ),
        30,
        what="the Ready gauge and the cold start counted",
    )
    ok = {"kind": "Sandbox", "result": "ok"}
    assert value(after, "paddock_reconciles_total", **ok) > value(
        before, "paddock_reconciles_total", **ok
    )
    assert value(after, "paddock_reconcile_duration_seconds_count", kind="Sandbox") > 0

    cluster.apply(command_run("counted", "box", "seq 1 25"), namespace)
    assert wait_for_run(cluster, namespace, "counted")["phase"] == "Succeeded"
    done = wait_for(
        lambda: (
            (s := scrape(operator.metrics_url))
            and value(s, "paddock_agentruns", phase="Succeeded", harness="command") >= 1
            and s
        ),
        30,
        what="the Succeeded gauge",
    )
    events = value(done, "paddock_agentrun_events_total", harness="command")
    assert events - value(before, "paddock_agentrun_events_total", harness="command") >= 25
    assert value(done, "paddock_agentrun_log_bytes_total", backend="configmap") > value(
        before, "paddock_agentrun_log_bytes_total", backend="configmap"
    )
    assert (
        value(done, "paddock_agentrun_duration_seconds_count", harness="command", phase="Succeeded")
        >= 1
    )
    for source in ("setup", "command"):  # an unrestricted sandbox's commands are allowed
        allowed = {"decision": "allow", "source": source}
        counted = value(done, "paddock_policy_decisions_total", **allowed)
        assert counted > value(before, "paddock_policy_decisions_total", **allowed), source
    # Every series exists from the start, so a dashboard tells 0 from missing.
    assert ("paddock_policy_decisions_total", (("decision", "deny"), ("source", "harness"))) in done
