"""Egress by host name: the patterns the schema takes, how the gateway's judge matches them,
and the rules a policy's Valid condition calls ineffective."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from paddock.api.policy import HostRules, SandboxPolicySpec
from paddock.policy.check import problems
from paddock.policy.hosts import approved, ask_rule, judge_host, normal_host


def _rules(
    allow: tuple[str, ...] | list[str] = (),
    deny: tuple[str, ...] | list[str] = (),
    default: str = "deny",
    ask: tuple[str, ...] | list[str] = (),
) -> HostRules:
    return HostRules.model_validate(
        {"allow": list(allow), "ask": list(ask), "deny": list(deny), "default": default}
    )


@pytest.mark.parametrize(
    "pattern",
    [
        "github.com",
        "*.npmjs.org",
        "pypi.org:443",
        "a-b.c0.example:8443",
        "localhost",
        "xn--bcher-kva.example",
    ],
)
def test_the_schema_takes_host_patterns(pattern: str) -> None:
    assert _rules(allow=[pattern]).allow == [pattern]


@pytest.mark.parametrize(
    "pattern",
    ["1.2.3.4", "10.0.0.1:443", "[::1]", "GitHub.com", "*.", "*", "a.*.com", "*github.com",
     "x.com:0", "x.com:65536", "x.com:", "-x.com", "x-.com", "x..com", "https://x.com", "x.com/a",
     "x.com:443:1", "",
     # hexadecimal, octal and decimal address forms
     "0x7f000001", "0x7f.1", "0177.0.0.1", "2130706433", "*.0x7f", "a.0xff:443", "127.1"],
)  # fmt: skip
def test_the_schema_refuses_what_is_not_a_host_pattern(pattern: str) -> None:
    with pytest.raises(ValidationError, match="host name"):
        _rules(allow=[pattern])


SUBDOMAINS_BUT_ONE = _rules(allow=["*.x.example"], deny=["bad.x.example"])
ALL_BUT_EVIL = _rules(deny=["*.evil.example"], default="allow")
ANY_NAME = _rules(default="allow")

# (rules, host, port, allowed, deciding rule)
JUDGED = [
    (_rules(allow=["github.com"]), "github.com", 443, True, "github.com"),
    (_rules(allow=["github.com"]), "github.com", 80, True, "github.com"),
    (_rules(allow=["github.com"]), "github.com", 22, False, None),
    (_rules(allow=["github.com"]), "GitHub.COM.", 443, True, "github.com"),
    (_rules(allow=["github.com"]), "api.github.com", 443, False, None),
    (_rules(allow=["github.com"]), "github.com.evil.example", 443, False, None),
    (_rules(allow=["github.com"]), "evilgithub.com", 443, False, None),
    (_rules(allow=["*.npmjs.org"]), "registry.npmjs.org", 443, True, "*.npmjs.org"),
    (_rules(allow=["*.npmjs.org"]), "a.b.npmjs.org", 443, True, "*.npmjs.org"),
    (_rules(allow=["*.npmjs.org"]), "npmjs.org", 443, False, None),
    (_rules(allow=["*.npmjs.org"]), "evilnpmjs.org", 443, False, None),
    (_rules(allow=["pypi.org:443"]), "pypi.org", 443, True, "pypi.org:443"),
    (_rules(allow=["pypi.org:443"]), "pypi.org", 80, False, None),
    (_rules(allow=["git.example:9418"]), "git.example", 9418, True, "git.example:9418"),
    (SUBDOMAINS_BUT_ONE, "bad.x.example", 443, False, "bad.x.example"),
    (SUBDOMAINS_BUT_ONE, "ok.x.example", 443, True, "*.x.example"),
    (ALL_BUT_EVIL, "a.evil.example", 443, False, "*.evil.example"),
    (ALL_BUT_EVIL, "example.org", 8080, True, None),
    (ANY_NAME, "1.2.3.4", 443, False, None),
    (ANY_NAME, "127.1", 443, False, None),
    (ANY_NAME, "::1", 443, False, None),
    (ANY_NAME, "0x7f000001", 443, False, None),  # 127.0.0.1 to inet_aton: an address
    (ANY_NAME, "a b", 443, False, None),
    (ANY_NAME, "", 443, False, None),
    (_rules(allow=["github.com"]), "github.com\n", 443, True, "github.com"),
]  # fmt: skip


@pytest.mark.parametrize(("rules", "host", "port", "allowed", "rule"), JUDGED)
def test_a_host_is_judged_by_deny_then_allow_then_default(
    rules: HostRules, host: str, port: int, allowed: bool, rule: str | None
) -> None:
    verdict = judge_host(rules, host, port)
    assert (verdict.allowed, verdict.rule) == (allowed, rule), verdict.reason


def test_an_address_is_never_a_name() -> None:
    forms = (
        "10.0.0.1",
        "[::1]",
        "::ffff:127.0.0.1",
        "1.2.3.4.",
        "8.8.8.8",
        # hexadecimal, octal and decimal forms of 127.0.0.1, which inet_aton reads
        "0x7f000001",
        "0x7f.1",
        "0X7F.0.0.1",
        "0177.0.0.1",
        "2130706433",
        "127.1",
        "a.0x",
    )
    for address in forms:
        assert normal_host(address) is None


def _policy(hosts: dict[str, object], network: str = "allow") -> SandboxPolicySpec:
    return SandboxPolicySpec.model_validate(
        {"capabilities": {"network": network}, "network": {"hosts": hosts}}
    )


def test_an_allow_rule_a_deny_rule_covers_is_ineffective() -> None:
    found = problems(
        _policy({"allow": ["a.x.example", "*.b.x.example", "x.example"], "deny": ["*.x.example"]})
    )
    assert [p.split("'")[1] for p in found] == ["a.x.example", "*.b.x.example"]
    assert all("no effect" in p for p in found)


def test_a_deny_rule_on_other_ports_leaves_the_allow_rule_working() -> None:
    assert problems(_policy({"allow": ["x.example:8443"], "deny": ["x.example"]})) == []
    found = problems(_policy({"allow": ["x.example:443"], "deny": ["x.example"]}))
    assert len(found) == 1


def test_hosts_without_network_allow_are_ineffective() -> None:
    found = problems(_policy({"allow": ["github.com"]}, network="deny"))
    assert len(found) == 1
    assert "capabilities.network is deny" in found[0]
    assert problems(_policy({"allow": ["github.com"]})) == []


ASKING = _rules(
    allow=["*.npmjs.org"], ask=["registry.npmjs.org", "*.pypi.org"], deny=["x.pypi.org"]
)

# (rules, host, port, decision, deciding rule): deny > ask > allow > default
ASKED = [
    (ASKING, "registry.npmjs.org", 443, "ask", "registry.npmjs.org"),
    (ASKING, "cdn.npmjs.org", 443, "allow", "*.npmjs.org"),
    (ASKING, "files.pypi.org", 443, "ask", "*.pypi.org"),
    (ASKING, "x.pypi.org", 443, "deny", "x.pypi.org"),
    (ASKING, "example.org", 443, "deny", None),
    (_rules(default="ask"), "example.org", 443, "ask", None),
    (_rules(default="ask"), "10.0.0.1", 443, "deny", None),  # an address: never asked about
]  # fmt: skip


@pytest.mark.parametrize(("rules", "host", "port", "decision", "rule"), ASKED)
def test_a_host_to_ask_about_is_asked_about_unless_denied(
    rules: HostRules, host: str, port: int, decision: str, rule: str | None
) -> None:
    verdict = judge_host(rules, host, port)
    assert (verdict.decision, verdict.rule) == (decision, rule), verdict.reason


def test_a_host_is_approved_by_its_own_approval_or_an_approve_always_of_its_rule() -> None:
    asked = judge_host(ASKING, "files.pypi.org", 443)
    assert ask_rule(asked) == "network.hosts.ask *.pypi.org"
    assert approved(asked, "files.pypi.org:443", [("files.pypi.org:443", [], False)])
    assert not approved(asked, "files.pypi.org:443", [("files.pypi.org:80", [], False)])
    always = [("other.pypi.org:443", ["network.hosts.ask *.pypi.org"], True)]
    assert approved(asked, "files.pypi.org:443", always)
    once = [("other.pypi.org:443", ["network.hosts.ask *.pypi.org"], False)]
    assert not approved(asked, "files.pypi.org:443", once)
    by_default = judge_host(_rules(default="ask"), "example.org", 443)
    assert ask_rule(by_default) == "network.hosts.default"


def test_an_ask_rule_a_deny_rule_covers_and_an_allow_rule_an_ask_rule_covers_are_ineffective() -> (
    None
):
    found = problems(
        _policy({"allow": ["a.x.example"], "ask": ["*.x.example", "b.y.example"],
                 "deny": ["*.y.example"]})
    )  # fmt: skip
    assert len(found) == 2
    assert "network.hosts.ask 'b.y.example' is covered by the deny rule '*.y.example'" in found[0]
    assert "network.hosts.allow 'a.x.example' is covered by the ask rule '*.x.example'" in found[1]
