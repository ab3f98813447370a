"""The egress gateway's deciding parts: which sandbox an address is, what its policy lets it
reach, Squid's helper protocol, Squid's configuration, and what a sandbox with network.hosts
is rendered with (its NetworkPolicy's egress to the gateway alone, its proxy variables).
Squid itself, the watches and the enforcement are tested on the real node
(tests/e2e/test_egress_gateway.py)."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from paddock.api.policy import SandboxPolicySpec
from paddock.gateway.directory import Ask, Directory, sni_matches
from paddock.gateway.helper import answer_access, answer_sni, serve
from paddock.gateway.squid import SquidConfig, render_squid_conf
from paddock.render.cluster_addresses import ClusterAddresses
from paddock.render.network_policy import ClusterNetwork, Gateway, render_network_policy
from paddock.settings import OperatorSettings

HOSTS = {"network": {"hosts": {"allow": ["github.com", "*.npmjs.org"]}}}


def _pod(name: str, ip: str, owner_uid: str = "uid-box", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team",
            "name": name,
            "labels": {"paddock.dev/sandbox": "box"},
            "ownerReferences": [
                {"kind": "Sandbox", "name": "box", "uid": owner_uid, "controller": True}
            ],
        },
        "status": {"phase": phase, "podIPs": [{"ip": ip}]},
    }


def _sandbox(policy: str | None, inline: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {"policy": inline} if inline is not None else {}
    return {
        "metadata": {"namespace": "team", "name": "box", "uid": "uid-box"},
        "spec": spec,
        "status": {"policy": policy} if policy else {},
    }


def _policy(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": spec}


def _directory(policy: str | None = "fence", spec: dict[str, Any] = HOSTS) -> Directory:
    directory = Directory()
    directory.pod("ADDED", _pod("box", "10.0.0.7"))
    directory.sandbox("ADDED", _sandbox(policy))
    directory.policy("ADDED", _policy("team", "fence", spec))
    return directory


def test_a_sandbox_pod_reaches_what_its_policy_allows() -> None:
    directory = _directory()
    allowed = directory.decide("10.0.0.7", "github.com", 443)
    assert (allowed.allowed, allowed.sandbox, allowed.rule) == (True, "team/box", "github.com")
    assert directory.decide("10.0.0.7", "registry.npmjs.org", 443).allowed
    denied = directory.decide("10.0.0.7", "evil.example", 443)
    assert (denied.allowed, denied.sandbox, denied.rule) == (False, "team/box", None)
    assert not directory.decide("10.0.0.7", "140.82.112.3", 443).allowed


def test_an_address_that_is_no_sandbox_pods_reaches_nothing() -> None:
    directory = _directory()
    assert directory.decide("10.0.0.8", "github.com", 443).sandbox == "-"
    directory.pod("ADDED", _pod("intruder", "10.0.0.9", owner_uid="someone-else"))
    assert not directory.decide("10.0.0.9", "github.com", 443).allowed
    unowned = _pod("plain", "10.0.0.10")
    unowned["metadata"]["ownerReferences"] = []
    directory.pod("ADDED", unowned)
    assert directory.decide("10.0.0.10", "github.com", 443).sandbox == "-"


def test_a_pod_gone_or_finished_gives_up_its_address() -> None:
    directory = _directory()
    directory.pod("MODIFIED", _pod("box", "10.0.0.7", phase="Succeeded"))
    assert not directory.decide("10.0.0.7", "github.com", 443).allowed
    directory.pod("MODIFIED", _pod("box", "10.0.0.7"))
    assert directory.decide("10.0.0.7", "github.com", 443).allowed
    directory.pod("DELETED", _pod("box", "10.0.0.7"))
    assert directory.decide("10.0.0.7", "github.com", 443).sandbox == "-"


def test_a_policy_change_decides_the_next_connection() -> None:
    directory = _directory()
    directory.policy("MODIFIED", _policy("team", "fence", {"network": {"hosts": {}}}))
    assert not directory.decide("10.0.0.7", "github.com", 443).allowed
    directory.policy("DELETED", _policy("team", "fence", {}))
    gone = directory.decide("10.0.0.7", "github.com", 443)
    assert not gone.allowed
    assert "not known" in gone.reason


def test_inline_default_and_missing_policies() -> None:
    inline = Directory()
    inline.pod("ADDED", _pod("box", "10.0.0.7"))
    inline.sandbox("ADDED", _sandbox("inline", HOSTS))
    assert inline.decide("10.0.0.7", "github.com", 80).allowed
    assert not inline.decide("10.0.0.7", "gitlab.com", 443).allowed
    other_namespace = _directory(policy="platform/strict")
    other_namespace.policy("ADDED", _policy("platform", "strict", {"network": {"hosts": {}}}))
    assert not other_namespace.decide("10.0.0.7", "github.com", 443).allowed
    none = _directory(policy=None)
    assert none.decide("10.0.0.7", "anything.example", 8080).allowed
    assert not none.decide("10.0.0.7", "10.1.2.3", 443).allowed
    network_off = _directory(spec={**HOSTS, "capabilities": {"network": "deny"}})
    assert not network_off.decide("10.0.0.7", "github.com", 443).allowed
    invalid = _directory(spec={"network": {"hosts": {"allow": ["1.2.3.4"]}}})
    assert invalid.decide("10.0.0.7", "github.com", 443).reason == "its policy is invalid"


@pytest.mark.parametrize(
    ("host", "sni", "same"),
    [("github.com", "github.com", True), ("GitHub.com", "github.com.", True),
     ("github.com", "evil.example", False), ("github.com", "-", False),
     ("github.com", "", False), ("1.2.3.4", "1.2.3.4", False)],
)  # fmt: skip
def test_a_tunnel_must_name_the_host_it_asked_for(host: str, sni: str, same: bool) -> None:
    assert sni_matches(host, sni) is same


def test_the_helper_answers_each_channel_and_logs_the_sandbox() -> None:
    directory, ready = _directory(), threading.Event()
    ready.set()
    out = io.BytesIO()
    lines = io.BytesIO(b"0 10.0.0.7 github.com 443 -\n1 10.0.0.7 evil%20x 443 -\n\n")
    serve(lines, out.write, lambda words: answer_access(directory, ready, words))
    first, second = out.getvalue().decode().splitlines()
    assert first.startswith('0 OK log="sandbox=team/box decision=allow host=github.com:443 ')
    assert second.startswith('1 ERR log="sandbox=team/box decision=deny host=evil x:443 ')
    assert 'message="Paddock' in second


def test_a_starting_helper_lets_nothing_through() -> None:
    answer = answer_access(_directory(), threading.Event(), ["10.0.0.7", "github.com", "443"])
    assert answer.startswith("ERR")
    assert "starting" in answer


def test_the_sni_helper() -> None:
    assert answer_sni(["github.com", "github.com"]) == "OK"
    assert answer_sni(["github.com", "evil.example"]).startswith("ERR")
    assert "no server name" in answer_sni(["github.com", "-"])


def test_squid_refuses_internal_addresses_before_asking_and_peeks_before_splicing() -> None:
    config = SquidConfig(
        listen="10.1.0.1:3128", runtime=Path("/run/gw"), relay="/usr/bin/socat",
        vouched=("10.1.0.1/32",),
    )  # fmt: skip
    lines = render_squid_conf(config).splitlines()
    order = [
        "http_access deny manager",
        "http_access deny paddock_squid",
        "http_access deny paddock_internal !paddock_vouched",
        "http_access allow paddock_access",
        "http_access deny all",
        "ssl_bump peek step1",
        "ssl_bump splice step2 paddock_sni",
        "ssl_bump terminate all",
    ]
    assert [line for line in lines if line in order] == order
    internal = next(line for line in lines if line.startswith("acl paddock_internal dst"))
    for cidr in ("10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "::1/128"):
        assert cidr in internal.split()
    access = next(line for line in lines if "external_acl_type paddock_access" in line)
    assert "ttl=0" in access
    assert access.endswith("/usr/bin/socat STDIO UNIX-CONNECT:/run/gw/access.sock")


def test_squid_shows_nothing_of_itself() -> None:
    """Its own URLs refused on any host, and none of the headers it adds that name it."""
    lines = render_squid_conf(
        SquidConfig(listen="10.1.0.1:3128", runtime=Path("/run/gw"), relay="/usr/bin/socat")
    ).splitlines()
    assert "acl paddock_squid urlpath_regex ^/squid-internal-" in lines
    for header in ("X-Cache", "X-Cache-Lookup", "X-Squid-Error"):
        assert f"reply_header_access {header} deny all" in lines
    assert "via off" in lines
    assert "visible_hostname egress-gateway" in lines


def _gateway() -> Gateway:
    return Gateway(
        proxy="http://gw:3128",
        port=3128,
        cidrs=("192.0.2.9",),
        namespace="paddock-system",
        pod_labels={"app": "gw"},
    )


def test_a_policy_with_hosts_reaches_the_gateway_alone() -> None:
    cluster = ClusterNetwork(gateway=_gateway())
    spec = SandboxPolicySpec.model_validate(
        {**HOSTS, "network": {**HOSTS["network"], "dns": False}}
    )
    egress = render_network_policy("box", "team", spec, cluster)["spec"]["egress"]
    assert egress == [
        {
            "to": [
                {"ipBlock": {"cidr": "192.0.2.9/32"}},
                {
                    "podSelector": {"matchLabels": {"app": "gw"}},
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "paddock-system"}
                    },
                },
            ],
            "ports": [{"protocol": "TCP", "port": 3128}],
        }
    ]


def test_without_hosts_egress_is_by_address_as_before() -> None:
    plain = SandboxPolicySpec()
    with_gateway = render_network_policy("box", "team", plain, ClusterNetwork(gateway=_gateway()))
    before = render_network_policy("box", "team", plain, ClusterNetwork())
    assert with_gateway == before


def test_hosts_without_a_gateway_reach_nothing_but_the_egress_rules() -> None:
    """Fails closed: no internet by address in place of the gateway that would judge names."""
    rule = {"cidrs": ["203.0.113.0/24"], "ports": [{"port": 22}]}
    hosts = SandboxPolicySpec.model_validate(
        {**HOSTS, "network": {**HOSTS["network"], "egress": [rule]}}
    )
    egress = render_network_policy("box", "team", hosts, ClusterNetwork())["spec"]["egress"]
    assert [peer for entry in egress for peer in entry["to"] if "ipBlock" in peer] == [
        {"ipBlock": {"cidr": "203.0.113.0/24"}}
    ]
    assert {"protocol": "TCP", "port": 22} in egress[-1]["ports"]


def test_the_gateway_settings_need_somewhere_to_let_sandboxes_reach() -> None:
    with pytest.raises(ValidationError, match="gateway_pod_labels"):
        OperatorSettings.from_env({"PADDOCK_GATEWAY_PROXY": "http://gw:3128"})
    settings = OperatorSettings.from_env(
        {"PADDOCK_GATEWAY_PROXY": "http://gw:3128", "PADDOCK_GATEWAY_CIDRS": "192.0.2.9,192.0.2.10"}
    )
    assert settings.gateway.cidrs == ["192.0.2.9", "192.0.2.10"]


def _node(name: str, *addresses: str) -> dict[str, Any]:
    listed = [{"type": "InternalIP", "address": a} for a in addresses]
    return {"metadata": {"name": name}, "status": {"addresses": listed}}


def test_the_clusters_own_addresses_follow_its_nodes_and_api_server() -> None:
    addresses = ClusterAddresses()
    assert addresses.relisted("Node", [_node("a", "192.0.2.2"), _node("b", "2001:db8::1")])
    api = {"metadata": {"name": "kubernetes"}, "endpoints": [{"addresses": ["198.51.100.7"]}]}
    assert addresses.relisted("EndpointSlice", [api])
    assert addresses.all() == {"192.0.2.2", "198.51.100.7", "2001:db8::1"}
    assert not addresses.seen("MODIFIED", {**_node("a", "192.0.2.2"), "kind": "Node"})
    assert addresses.seen("DELETED", {**_node("b"), "kind": "Node"})
    # A new listing forgets what it no longer names, of its kind only.
    assert addresses.relisted("Node", [])
    assert addresses.all() == {"198.51.100.7"}


ASKS = {"network": {"hosts": {"allow": ["github.com"], "ask": ["*.npmjs.org"]}}}


def _run(phase: str = "Running", approvals: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status = {"phase": phase, "sandboxName": "box", "approvals": approvals or []}
    return {"metadata": {"namespace": "team", "name": "r1", "uid": "uid-r1"}, "status": status}


def _approval(target: str, state: str = "Approved", always: bool = False) -> dict[str, Any]:
    return {"id": "host-1.ab", "kind": "network", "target": target, "state": state,
            "rules": ["network.hosts.ask *.npmjs.org"], "always": always}  # fmt: skip


def test_a_host_to_ask_about_is_refused_and_asked_about_on_the_run_in_the_sandbox() -> None:
    directory = _directory(spec=ASKS)
    nobody = directory.decide("10.0.0.7", "registry.npmjs.org", 443)
    assert (nobody.allowed, nobody.ask) == (False, None)
    assert "no run is running in the sandbox" in nobody.reason
    directory.run("ADDED", _run())
    asked = directory.decide("10.0.0.7", "Registry.npmjs.org", 443)
    assert not asked.allowed
    assert asked.ask == Ask("team", "r1", "uid-r1", "registry.npmjs.org:443")
    assert directory.decide("10.0.0.7", "github.com", 443).ask is None


def test_an_approved_host_passes_an_approve_always_covers_its_rule_and_a_denial_does_not() -> None:
    directory = _directory(spec=ASKS)
    directory.run("ADDED", _run(approvals=[_approval("registry.npmjs.org:443")]))
    assert directory.decide("10.0.0.7", "registry.npmjs.org", 443).allowed
    assert not directory.decide("10.0.0.7", "registry.npmjs.org", 80).allowed
    assert not directory.decide("10.0.0.7", "cdn.npmjs.org", 443).allowed
    always = _approval("registry.npmjs.org:443", always=True)
    directory.run("MODIFIED", _run(approvals=[always]))
    assert directory.decide("10.0.0.7", "cdn.npmjs.org", 443).allowed
    directory.run("MODIFIED", _run(approvals=[_approval("registry.npmjs.org:443", "Denied")]))
    assert not directory.decide("10.0.0.7", "registry.npmjs.org", 443).allowed
    directory.run("MODIFIED", _run("Succeeded", approvals=[always]))  # ended: nothing approved
    assert not directory.decide("10.0.0.7", "registry.npmjs.org", 443).allowed


def test_the_helper_asks_once_it_refuses_a_host_to_ask_about() -> None:
    directory, ready, asked = _directory(spec=ASKS), threading.Event(), []
    directory.run("ADDED", _run())
    ready.set()
    said = answer_access(directory, ready, ["10.0.0.7", "registry.npmjs.org", "443"], asked.append)
    assert said.startswith("ERR ")
    assert "waiting for approval on run r1" in said
    assert asked == [Ask("team", "r1", "uid-r1", "registry.npmjs.org:443")]
