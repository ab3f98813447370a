"""The real node's Service ClusterIPs (paddock_dev/services.py), decided: each ClusterIP Service
port goes to its ready endpoints' addresses and ports (by the port's name, as kube-proxy
matches them), and the table that says so is one the real nft accepts (``nft -c``: checked,
not applied). The chart's pods reach each other and the API server through it on the real node
(tests/e2e/test_chart_install.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest

from paddock_dev.services import Route, routes, ruleset


def _service(namespace: str, name: str, address: str, *ports: dict[str, Any]) -> dict[str, Any]:
    meta = {"namespace": namespace, "name": name}
    return {"metadata": meta, "spec": {"clusterIP": address, "ports": list(ports)}}


def _slice(service: str, ports: list[dict[str, Any]], *endpoints: dict[str, Any],
           family: str = "IPv4") -> dict[str, Any]:  # fmt: skip
    labels = {"kubernetes.io/service-name": service}
    meta = {"namespace": "team", "name": f"{service}-x", "labels": labels}
    return {"addressType": family, "metadata": meta, "ports": ports, "endpoints": list(endpoints)}


PROXY = {"name": "proxy", "port": 3128, "protocol": "TCP"}
METRICS = {"name": "metrics", "port": 80}  # TCP when unsaid
SERVICES = [
    _service("team", "gateway", "10.0.0.20", PROXY, METRICS),
    _service("team", "headless", "None", PROXY),
    _service("team", "dns", "10.0.0.10", {"name": "dns", "port": 53, "protocol": "UDP"}),
    _service("team", "sctp", "10.0.0.30", {"port": 9, "protocol": "SCTP"}),
    _service("team", "v6", "fd00::1", PROXY),
]
SLICES = [
    _slice(
        "gateway",
        [{"name": "proxy", "port": 8128, "protocol": "TCP"}, {"name": "metrics", "port": 9090}],
        {"addresses": ["10.245.0.6"], "conditions": {"ready": True}},
        {"addresses": ["10.245.0.5"]},  # readiness unknown: served, as kube-proxy does
        {"addresses": ["10.245.0.7"], "conditions": {"ready": False}},
    ),
    _slice("gateway", [PROXY], {"addresses": ["fd00::5"]}, family="IPv6"),
    _slice(
        "dns", [{"name": "dns", "port": 5353, "protocol": "UDP"}], {"addresses": ["10.245.0.9"]}
    ),
]


def test_each_cluster_ip_port_goes_to_its_ready_endpoints_by_port_name() -> None:
    assert routes(SERVICES, SLICES) == [
        Route("10.0.0.10", "udp", 53, (("10.245.0.9", 5353),)),
        Route("10.0.0.20", "tcp", 80, (("10.245.0.5", 9090), ("10.245.0.6", 9090))),
        Route("10.0.0.20", "tcp", 3128, (("10.245.0.5", 8128), ("10.245.0.6", 8128))),
    ]


def test_only_the_nodes_own_endpoints_and_numbered_ports_are_followed() -> None:
    """kwok's simulated pods have addresses that lead nowhere; a slice port without a number
    (every port) names no DNAT target: neither stops the rest."""
    on_both = _slice(
        "gateway",
        [{"name": "proxy", "port": 8128}, {"name": "metrics"}],
        {"addresses": ["10.245.0.5"], "nodeName": "paddock-node"},
        {"addresses": ["10.244.0.9"], "nodeName": "paddock-kwok"},
        {"addresses": ["192.0.2.2"]},  # on no node: the API server's, say
    )
    found = {r.port: r.endpoints for r in routes(SERVICES[:1], [on_both], "paddock-node")}
    assert set(found) == {80, 3128}
    assert found[3128] == (("10.245.0.5", 8128), ("192.0.2.2", 8128))
    assert found[80] == ()


def test_a_service_without_endpoints_is_listed_with_none_and_gets_no_rule() -> None:
    (lonely,) = routes([_service("team", "gateway", "10.0.0.20", PROXY)], [])
    assert lonely.endpoints == ()
    text = ruleset("paddock-t-services", "pdkt", [lonely])
    assert "10.0.0.20" not in text


def test_the_table_replaces_itself_and_judges_only_its_bridge() -> None:
    text = ruleset("paddock-t-services", "pdkt", routes(SERVICES, SLICES))
    assert text.startswith(
        "table ip paddock-t-services\ndelete table ip paddock-t-services\n"
        "table ip paddock-t-services {"
    )
    assert 'iifname "pdkt" ip daddr . meta l4proto . th dport vmap @services' in text
    assert "10.0.0.20 . tcp . 3128 : goto s2" in text
    assert "numgen random mod 2 vmap { 0 : goto s2e0, 1 : goto s2e1 }" in text
    assert "meta l4proto udp dnat to 10.245.0.9:5353" in text


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None, reason="nft checks rules as root"
)
@pytest.mark.parametrize("found", [routes(SERVICES, SLICES), []], ids=["services", "none"])
def test_nft_accepts_the_table(found: list[Route]) -> None:
    text = ruleset("paddock-unit-services", "pdkunit", found)
    checked = subprocess.run(["nft", "-c", "-f", "-"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
