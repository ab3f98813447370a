"""A sandbox that never holds its model's key, and a budget counted where the model is reached,
on the real node: each real CLI (Claude Code, Codex, OpenCode, Gemini CLI) completes a run in a
sandbox whose policy denies the network, its model reached only through the local cluster's
gateway, whose model route swaps the run's token for the key the scripted model server then
sees. While each runs, the agent itself searches every process's environment it can read, the
workspace, HOME and /tmp for the key, and tries the model server directly: it finds nothing,
and cannot connect. The run's log holds no key, and the run's route is gone once it ends.

Each run's status.usage is what the model server reported for the requests it answered; a run
whose token budget is below what its script needs ends BudgetExceeded once a request crossed
it; a namespace whose day under a policy is spent keeps its next run Pending until the policy's
budget is raised."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from paddock.render.model_routes import RUN_UID_LABEL
from paddock_dev import cluster as local
from paddock_dev import gateway, node
from paddock_dev.processes import ClusterState
from support.gateways import HeldDownload, OwnGateway, use_local_gateway
from support.harnesses import API_KEY, MODELS
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.real_node import ON_NODE, local_cluster_plan
from support.runs import OperatorProcess, agent_run, log_events, of_type, wait_for_run
from support.sandboxes import get, sandbox, secret, status_of, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

HARNESSES = ["claude-code", "codex", "opencode", "gemini"]
KEY_HEADERS = {
    "claude-code": ("x-api-key", API_KEY),
    "opencode": ("x-api-key", API_KEY),
    "codex": ("authorization", f"Bearer {API_KEY}"),
    "gemini": ("x-goog-api-key", API_KEY),
}
# The agent's search: the key is put together at run time, so that the command (which the CLI
# keeps in its own session files) does not hold it whole.
HALF = len(API_KEY) // 2
SEARCH = (
    f'k={API_KEY[:HALF]}; k="${{k}}{API_KEY[HALF:]}"; '
    'for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null | grep -qF "$k" '
    '&& echo "ENV $f"; done; '
    'grep -rlsF "$k" /workspace "$HOME" /tmp | sed "s/^/FILE /"; '
    "curl -sS --max-time 2 -o /dev/null {model} 2>/dev/null; echo DIRECT=$?; echo SEARCHED"
)


@pytest.fixture
def route_settings(monkeypatch: pytest.MonkeyPatch, cluster: Cluster) -> None:
    """The operator's settings for the local cluster's gateway and its routes."""
    use_local_gateway(cluster, monkeypatch)


@pytest.fixture
def route_operator(route_settings: None, request: pytest.FixtureRequest) -> Any:
    """The operator, in this process, with ``route_settings``."""
    return request.getfixturevalue("operator")


CHART_PRICES = yaml.safe_load(
    (Path(__file__).parents[2] / "charts" / "paddock" / "values.yaml").read_text()
)["gateway"]["prices"]
GENEROUS = {"tokens": 1_000_000, "costUSD": 10}
NO_NETWORK = {"commands": {"default": "allow"}, "capabilities": {"network": "deny"}}
KEY = {"secretKeyRef": {"name": "llm", "key": "key"}, "baseUrl": ""}


def _price(model: str) -> dict[str, float]:
    """The chart's price of a model: its own, or that of the model it is a dated form of."""
    return (
        CHART_PRICES.get(model) or CHART_PRICES[re.sub(r"-(\d{8}|\d{4}-\d{2}-\d{2})$", "", model)]
    )


def _model_of(request: dict[str, Any]) -> str:
    if "/models/" in request["path"]:  # Gemini: the model is in the path
        return str(request["path"].split("/models/")[1].split(":")[0])
    return str(request["body"]["model"])


def _assert_usage_is_what_the_model_reported(
    status: dict[str, Any], requests: list[dict[str, Any]], harness: str
) -> None:
    """100 tokens in and 20 out an answer, priced by the chart's table."""
    cost = sum((100 * _price(_model_of(r))["inputPerMTok"]
                + 20 * _price(_model_of(r))["outputPerMTok"]) / 1e6 for r in requests)  # fmt: skip
    usage = status["usage"]
    n = len(requests)
    assert (usage["inputTokens"], usage["outputTokens"], usage["tokens"]) == (
        100 * n, 20 * n, 120 * n
    ), (harness, usage)  # fmt: skip
    assert usage["modelRequests"] == n, (harness, usage)
    assert usage["source"] == "gateway", (harness, usage)
    assert usage["costUsd"] == pytest.approx(cost, abs=1e-6), (harness, usage)


def _routes(cluster: Cluster, namespace: str) -> list[str]:
    """The model routes the gateway holds for the namespace's runs (the gateway's namespace
    holds every test's)."""
    listing = cluster.kubectl("get", "agentruns", "-n", namespace, "-o", "json").stdout
    runs = {run["metadata"]["uid"] for run in json.loads(listing)["items"]}
    routes = cluster.kubectl("get", "secrets", "-n", gateway.NAMESPACE, "-l", RUN_UID_LABEL,
                             "-o", "json").stdout  # fmt: skip
    held = json.loads(routes)["items"]
    return [r["metadata"]["name"] for r in held if r["metadata"]["labels"][RUN_UID_LABEL] in runs]


def _samples(state: ClusterState, metric: str) -> dict[tuple[str, ...], float]:
    """The gateway's samples of a counter, by their label values (in the order served)."""
    with urllib.request.urlopen(gateway.metrics_url(state), timeout=5) as response:  # noqa: S310
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            found[tuple(sorted(labels.items()))] = float(line.rsplit(" ", 1)[1])
    return {tuple(v for _, v in key): value for key, value in found.items()}


@contextlib.contextmanager
def _four_boxes(cluster: Cluster, namespace: str) -> Iterator[dict[str, ScriptedModel]]:
    """A Ready sandbox for each CLI (``box-HARNESS``, its policy denying the network) and a
    scripted model server of its own, yielded by CLI."""
    image = local.load_image(local.default_state_dir(), "sandbox")
    host = node.host_ip()
    assert host is not None
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    cluster.apply(workspace("app"), namespace)
    cluster.apply(secret("llm", key=API_KEY), namespace)
    for harness in HARNESSES:
        box = sandbox(f"box-{harness}", "app", image=image, storage=storage, policy=NO_NETWORK,
                      **ON_NODE)  # fmt: skip
        cluster.apply(box, namespace)
    with contextlib.ExitStack() as stack:
        models = {h: stack.enter_context(ScriptedModel([], host=host)) for h in HARNESSES}
        for harness in HARNESSES:
            wait_for_phase(cluster, namespace, f"box-{harness}", "Ready", timeout=240)
        yield models


def _each_cli_at_once(
    cluster: Cluster,
    namespace: str,
    models: dict[str, ScriptedModel],
    steps: list[str],
    name: str,
    **run: Any,
) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each CLI's run (``HARNESS-NAME``), all at once, each in its own box against its own
    model server (``{model}`` in a step is its URL): the run's status and the requests its
    model server saw for it."""
    before = {harness: len(models[harness].requests) for harness in HARNESSES}
    for harness in HARNESSES:
        model = models[harness]
        model.commands = [step.replace("{model}", model.url) for step in steps]
        key = KEY | {"baseUrl": model.url}
        manifest = agent_run(f"{harness}-{name}", f"box-{harness}", harness, "Work.",
                             model=MODELS[harness], modelKey=key, **run)  # fmt: skip
        cluster.apply(manifest, namespace)
    return {
        harness: (wait_for_run(cluster, namespace, f"{harness}-{name}", timeout=300),
                  models[harness].requests[before[harness]:])
        for harness in HARNESSES
    }  # fmt: skip


def test_each_cli_reaches_its_model_through_the_gateway_never_holds_the_key_and_keeps_a_budget(
    cluster: Cluster, namespace: str, route_operator: Any
) -> None:
    """Each CLI, in its own sandbox: a run under a generous budget that searches for the key,
    then a run whose budget its script crosses."""
    state, _ = local_cluster_plan()
    with _four_boxes(cluster, namespace) as models:
        keyed = _each_cli_at_once(cluster, namespace, models, [SEARCH], "keyed", budget=GENEROUS)
        counted = _samples(state, "paddock_gateway_model_requests_total")  # (outcome, run)
        tokens = _samples(state, "paddock_model_tokens_total")  # (direction, harness, namespace)
        steps = ["echo step-one", "echo step-two", "echo step-three", "echo step-four"]
        capped = _each_cli_at_once(
            cluster, namespace, models, steps, "capped", budget={"tokens": 150}
        )
    for harness, (status, requests) in keyed.items():
        forwarded = counted.get(("2xx", f"{namespace}/{harness}-keyed"), 0)
        assert forwarded == len(requests), (harness, counted)
        # Counted at the route from the model's own usage fields: 100 in, 20 out a request.
        used = (
            tokens.get(("input", harness, namespace)),
            tokens.get(("output", harness, namespace)),
        )
        assert used == (100 * len(requests), 20 * len(requests)), (harness, tokens)
        _assert_the_key_stayed_out(cluster, namespace, f"{harness}-keyed", status, requests)
    for harness, (status, requests) in capped.items():
        _assert_stopped_at_the_ceiling(cluster, namespace, f"{harness}-capped", status, requests)
    assert _routes(cluster, namespace) == []  # each run's route went with its end
    for harness in HARNESSES:
        assert API_KEY not in json.dumps(get(cluster, namespace, "pod", f"box-{harness}"))


def _assert_the_key_stayed_out(
    cluster: Cluster,
    namespace: str,
    run: str,
    status: dict[str, Any],
    requests: list[dict[str, Any]],
) -> None:
    harness = run.rsplit("-", 1)[0]
    events = log_events(cluster, namespace, run)
    assert status["phase"] == "Succeeded", (run, status, events[-3:])
    route = next(c for c in status["conditions"] if c["type"] == "ModelRoute")
    assert (route["status"], route["reason"]) == ("True", "ThroughGateway"), run
    # The model server saw the real key, in the provider's own header, on every request.
    header, value = KEY_HEADERS[harness]
    assert requests, run
    for seen in requests:
        headers = {k.lower(): v for k, v in seen["headers"].items()}
        assert headers.get(header) == value, (run, seen["path"], headers)
    # The agent found the key nowhere, and could not reach the model server itself.
    outputs = [str(e["data"].get("output", "")) for e in of_type(events, "tool.result")]
    searched = next((o for o in outputs if "SEARCHED" in o), "")
    assert "SEARCHED" in searched, (run, outputs)
    assert "ENV " not in searched, (run, searched)
    assert "FILE " not in searched, (run, searched)
    assert "DIRECT=0" not in searched, (run, searched)
    assert API_KEY not in json.dumps(events), run
    # Under its budget: the model's figures are the run's usage, logged as they grew.
    _assert_usage_is_what_the_model_reported(status, requests, harness)
    assert of_type(events, "usage")[-1]["data"]["inputTokens"] == 100 * len(requests)


def _assert_stopped_at_the_ceiling(
    cluster: Cluster,
    namespace: str,
    run: str,
    status: dict[str, Any],
    requests: list[dict[str, Any]],
) -> None:
    events = log_events(cluster, namespace, run)
    assert status["phase"] == "Failed", (run, status, events[-3:])
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["reason"] == "BudgetExceeded", (run, complete)
    assert "the run passed its budget (tokens " in complete["message"], complete
    # Stopped after the request that crossed 150 (each answer is 120 tokens), not at the end
    # of its script; its usage is what the model server answered, to the token.
    assert 120 * len(requests) > 150, (run, len(requests))
    outputs = " ".join(str(e["data"].get("output", "")) for e in of_type(events, "tool.result"))
    assert "step-four" not in outputs, (run, outputs)
    _assert_usage_is_what_the_model_reported(status, requests, run)
    assert of_type(events, "run.failed")[-1]["data"]["reason"] == "BudgetExceeded"


def _metered_sandbox(cluster: Cluster, namespace: str, **spec: Any) -> None:
    image = local.load_image(local.default_state_dir(), "sandbox")
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    cluster.apply(workspace("app"), namespace)
    cluster.apply(secret("llm", key=API_KEY), namespace)
    cluster.apply(sandbox("box", "app", image=image, storage=storage, **spec, **ON_NODE), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready", timeout=240)


@pytest.mark.usefixtures("route_settings")
def test_a_budget_crossed_after_an_operator_kill_stops_the_run_at_the_same_ceiling(
    cluster: Cluster, namespace: str, as_operator: str
) -> None:
    """The operator (its own process) is SIGKILLed once the run's first request was counted;
    the requests after the next one started cross the budget: the run ends BudgetExceeded at
    the request that crossed it, and its usage is what the model answered (nothing counted
    twice, nothing lost)."""
    go = "until test -e /workspace/go; do sleep 0.1; done; echo step-one"
    steps = [go, *(f"echo step-{n}" for n in ("two", "three", "four", "five", "six", "seven"))]
    host = node.host_ip()
    assert host is not None
    with (
        OperatorProcess(namespace, as_operator) as operator,
        ScriptedModel(steps, host=host) as model,
    ):
        _metered_sandbox(cluster, namespace, policy=NO_NETWORK)
        key = KEY | {"baseUrl": model.url}
        run = agent_run("metered", "box", "claude-code", "Work.", model=MODELS["claude-code"],
                        modelKey=key, budget={"tokens": 400})  # fmt: skip
        cluster.apply(run, namespace)
        wait_for(
            lambda: (status_of(cluster, namespace, "agentrun", "metered").get("usage") or {}).get(
                "modelRequests"),
            timeout=240, what="the run's first request counted",
        )  # fmt: skip
        operator.restart()
        cluster.kubectl(
            "exec", "-n", namespace, "box", "-c", "sandbox", "--", "touch", "/workspace/go"
        )
        status = wait_for_run(cluster, namespace, "metered", timeout=300)
        requests = list(model.requests)

    events = log_events(cluster, namespace, "metered")
    assert status["phase"] == "Failed", (status, events[-3:])
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["reason"] == "BudgetExceeded", complete
    # 120 tokens an answer: stopped once a request crossed 400, not at the end of its script.
    assert 120 * len(requests) > 400, len(requests)
    outputs = " ".join(str(e["data"].get("output", "")) for e in of_type(events, "tool.result"))
    assert "step-seven" not in outputs, outputs
    _assert_usage_is_what_the_model_reported(status, requests, "claude-code")
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert status["eventCount"] == len(events)
    # Each usage event adds to the last (a request counted, or refused at the ceiling): none
    # logged twice, none going back.
    usage = [e["data"] for e in of_type(events, "usage")]
    assert all(before != after for before, after in itertools.pairwise(usage)), usage
    for key in ("inputTokens", "modelRequests", "refusedRequests"):
        assert [u[key] for u in usage] == sorted(u[key] for u in usage), (key, usage)
    assert usage[-1]["inputTokens"] == 100 * len(requests)


def _usage(cluster: Cluster, namespace: str, run: str) -> dict[str, Any]:
    return dict(status_of(cluster, namespace, "agentrun", run).get("usage") or {})


DOWNLOAD = (
    "curl -sS -o /dev/null -w 'bytes=%{{size_download}}' http://{host}/{path}; echo \" curl=$?\""
)


@pytest.mark.usefixtures("route_settings")
def test_a_gateway_killed_mid_answer_and_mid_download_fails_both_keeps_usage_serves_the_next(
    cluster: Cluster, namespace: str, as_operator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway of the test's own (the cluster's is every real-node test's) is SIGKILLed
    while an answer streams through its model route and a download through its proxy: the
    run fails, saying why, and the download ends at once, cut short, rather than hang; what
    the answer had used by then (counted as it passed) is in the run's usage; and once the
    gateway is back, the next run's requests and the next download go through."""
    _, plan = local_cluster_plan()
    host = node.host_ip()
    assert host is not None
    retries = {"name": "CLAUDE_CODE_MAX_RETRIES", "value": "0"}  # one try: the cut is final
    with (
        OwnGateway(cluster, "gateway-killed") as own,
        ScriptedModel(["echo one", "echo two"], host=host) as model,
        HeldDownload(plan.gateway) as download,
        ThreadPoolExecutor(1) as background,
    ):
        for name, value in own.settings().items():
            monkeypatch.setenv(name, value)
        files = f"{gateway.NAMES[0][0]}:{download.port}"
        policy = {"commands": {"default": "allow"}, "network": {"hosts": {"allow": [files]}}}
        with OperatorProcess(namespace, as_operator):
            _metered_sandbox(cluster, namespace, policy=policy)
            key = KEY | {"baseUrl": model.url}
            model.hold_step = 1
            cut = agent_run("cut", "box", "claude-code", "Work.", model=MODELS["claude-code"],
                            modelKey=key, env=[retries])  # fmt: skip
            cluster.apply(cut, namespace)
            wait_for(model.holding.is_set, 240, what="an answer held mid-stream")
            wait_for(
                lambda: (
                    _usage(cluster, namespace, "cut").get("inputTokens")
                    == 100 * len(model.requests)
                ),
                60,
                what="the held answer's input tokens in the run's usage",
            )
            held = background.submit(
                _in_box, cluster, namespace, DOWNLOAD.format(host=files, path="held")
            )
            wait_for(download.holding.is_set, 60, what="a download held mid-body")
            own.kill()
            failed = wait_for_run(cluster, namespace, "cut", timeout=120)
            wait_for(held.done, 30, what="the cut download to end")
            model.release.set()
            cut_requests = len(model.requests)

            own.start()
            model.hold_step = None
            after = agent_run("after", "box", "claude-code", "Work.", model=MODELS["claude-code"],
                              modelKey=key, env=[retries])  # fmt: skip
            cluster.apply(after, namespace)
            status = wait_for_run(cluster, namespace, "after", timeout=300)
            after_requests = len(model.requests) - cut_requests
            whole = _in_box(cluster, namespace, DOWNLOAD.format(host=files, path="whole"))

    assert failed["phase"] == "Failed", failed
    assert "API" in failed["message"], failed["message"]
    usage = failed["usage"]
    # Every request answered whole, and the one cut short: its input, counted as it passed.
    assert (usage["inputTokens"], usage["modelRequests"]) == (100 * cut_requests, cut_requests)
    assert status["phase"] == "Succeeded", status
    assert status["usage"]["inputTokens"] == 100 * after_requests
    # The download: cut where the gateway went (curl: "transfer closed with ... remaining"),
    # the next one whole.
    said = held.result()
    assert "curl=18" in said, said
    assert HeldDownload.PART <= int(said.split("bytes=")[1].split()[0]) < HeldDownload.SIZE
    assert f"bytes={HeldDownload.SIZE} curl=0" in whole, whole


def _in_box(cluster: Cluster, namespace: str, script: str) -> str:
    done = cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--", "bash", "-c", script, check=False
    )
    return done.stdout + done.stderr


def test_a_namespace_whose_day_is_spent_keeps_its_next_run_pending_until_the_budget_rises(
    cluster: Cluster, namespace: str, route_operator: Any
) -> None:
    metered = {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "SandboxPolicy",
        "metadata": {"name": "metered"},
        "spec": {"commands": {"default": "allow"}, "capabilities": {"network": "deny"},
                 "budget": {"perNamespaceDaily": {"tokens": 100}}},
    }  # fmt: skip
    cluster.apply(metered, namespace)
    _metered_sandbox(cluster, namespace, policyRef={"name": "metered"})
    host = node.host_ip()
    assert host is not None
    with ScriptedModel(["echo hello"], host=host) as model:
        key = KEY | {"baseUrl": model.url}
        first = agent_run("first", "box", "claude-code", "Go.", model=MODELS["claude-code"],
                          modelKey=key)  # fmt: skip
        cluster.apply(first, namespace)
        status = wait_for_run(cluster, namespace, "first", timeout=300)
        assert status["phase"] == "Succeeded", status  # a day's budget holds back starts only
        spent = len(model.requests)
        day = wait_for(
            lambda: [d for d in status_of(cluster, namespace, "sandboxpolicy", "metered").get(
                "dailyUsage", []) if d["namespace"] == namespace],
            timeout=30, what="the policy's day",
        )  # fmt: skip
        assert (day[0]["inputTokens"], day[0]["modelRequests"]) == (100 * spent, spent), day

        second = agent_run("second", "box", "claude-code", "Go.", model=MODELS["claude-code"],
                           modelKey=key)  # fmt: skip
        cluster.apply(second, namespace)
        waiting = wait_for(
            lambda: next((c for c in status_of(cluster, namespace, "agentrun", "second").get(
                "conditions", []) if c["type"] == "WithinBudget"), None),
            timeout=60, what="the second run held back",
        )  # fmt: skip
        assert (waiting["status"], waiting["reason"]) == ("False", "BudgetExhausted"), waiting
        assert f"namespace {namespace} has used its daily budget" in waiting["message"]
        assert status_of(cluster, namespace, "agentrun", "second")["phase"] == "Pending"
        assert len(model.requests) == spent  # nothing of the second reached the model

        raised = {"spec": {"budget": {"perNamespaceDaily": {"tokens": 1_000_000}}}}
        cluster.kubectl("patch", "sandboxpolicy", "metered", "-n", namespace, "--type=merge",
                        "-p", json.dumps(raised))  # fmt: skip
        status = wait_for_run(cluster, namespace, "second", timeout=300)
        assert status["phase"] == "Succeeded", status
        within = next(c for c in status["conditions"] if c["type"] == "WithinBudget")
        assert (within["status"], within["reason"]) == ("True", "WithinBudget"), within
