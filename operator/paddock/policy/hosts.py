"""Egress by host name: which hosts a policy's ``network.hosts`` lets a sandbox reach through
the egress gateway, and which of its rules can never apply. Pure.

A pattern is ``host``, or ``*.domain`` (its subdomains, not the domain itself), with an optional
``:port``; without one it matches ports 443 and 80. Precedence: deny > ask > allow > default.
A host to ask about is let through once a person approved it on the sandbox's run: approved,
that host and port for the rest of the run; approved always, every host the asking rule (or the
default) matches. What
the gateway is asked for is judged as a name: an address (``1.2.3.4``, ``[::1]``) matches no
pattern and is refused whatever the default, for a name's rules must not be side-stepped by
its address.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from paddock.api.policy import Decision, HostRules, SandboxPolicySpec

DEFAULT_PORTS = (443, 80)
# A last label that makes a name an address to inet_aton and to URL parsers (WHATWG's "ends in
# a number"): decimal, octal (a leading 0) or hexadecimal (0x, digits optional).
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")
_NAME = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
)


@dataclass(frozen=True)
class HostPattern:
    domain: str
    subdomains: bool  # "*.domain": subdomains of domain, never domain itself
    port: int | None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        """A pattern the schema accepted (``api.policy.HOST_PATTERN``)."""
        name, _, port = text.partition(":")
        subdomains = name.startswith("*.")
        return cls(name.removeprefix("*."), subdomains, int(port) if port else None)

    def ports(self) -> tuple[int, ...]:
        return DEFAULT_PORTS if self.port is None else (self.port,)

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports():
            return False
        if self.subdomains:
            return host.endswith("." + self.domain)
        return host == self.domain

    def covers(self, other: HostPattern) -> bool:
        """Whether every host and port ``other`` matches, this matches too."""
        if not set(other.ports()) <= set(self.ports()):
            return False
        if self.subdomains:
            return other.domain.endswith("." + self.domain) or (
                other.subdomains and other.domain == self.domain
            )
        return not other.subdomains and other.domain == self.domain


@dataclass(frozen=True)
class HostVerdict:
    decision: Decision
    rule: str | None  # the pattern that decided; None for the default or a refused name
    reason: str

    @property
    def allowed(self) -> bool:
        return self.decision == Decision.ALLOW


def normal_host(host: str) -> str | None:
    """The host as patterns are matched against it (lower case, no trailing dot), or None
    where it is not a DNS name: an address, or text no resolver would take as a name."""
    host = host.strip().lower().removesuffix(".")
    if not host or len(host) > 253 or not _NAME.fullmatch(host):
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return None
    if _NUMBER.fullmatch(host.rsplit(".", 1)[-1]):  # 127.1, 0x7f000001: addresses to inet_aton
        return None
    return host


def judge_host(rules: HostRules, host: str, port: int) -> HostVerdict:
    name = normal_host(host)
    if name is None:
        return HostVerdict(Decision.DENY, None, "not a host name (an address, or no name at all)")
    for decision, listed in ((Decision.DENY, rules.deny), (Decision.ASK, rules.ask),
                             (Decision.ALLOW, rules.allow)):  # fmt: skip
        for text in listed:
            if HostPattern.parse(text).matches(name, port):
                said = {Decision.DENY: "denied", Decision.ASK: "asked about",
                        Decision.ALLOW: "allowed"}[decision]  # fmt: skip
                return HostVerdict(decision, text, f"{said} by network.hosts.{decision} {text!r}")
    decision = Decision(str(rules.default))
    return HostVerdict(decision, None, f"no rule matches; network.hosts.default is {rules.default}")


def ask_rule(verdict: HostVerdict) -> str:
    """The rule an approval of a host names: what an approve-always of it covers."""
    return f"network.hosts.ask {verdict.rule}" if verdict.rule else "network.hosts.default"


def approved(
    verdict: HostVerdict, target: str, approvals: list[tuple[str, list[str], bool]]
) -> bool:
    """Whether a host the policy asks about is approved: ``target`` (HOST:PORT) among the
    approved ``(target, rules, always)`` of the run, or the asking rule among the rules of an
    approve-always."""
    rule = ask_rule(verdict)
    return any(t == target or (always and rule in rules) for t, rules, always in approvals)


def host_problems(spec: SandboxPolicySpec) -> list[str]:
    """One sentence per host rule that can never apply as written."""
    rules = spec.network.hosts
    if rules is None:
        return []
    found: list[str] = []
    if spec.capabilities.network != Decision.ALLOW:
        found.append(
            f"network.hosts has no effect while capabilities.network is "
            f"{spec.capabilities.network}: the sandbox has no egress to the gateway"
        )
    stronger: list[tuple[str, str, HostPattern]] = []  # (list, text, pattern), strongest first
    for name, listed in (("deny", rules.deny), ("ask", rules.ask), ("allow", rules.allow)):
        for text in listed:
            pattern = HostPattern.parse(text)
            cover = next((s for s in stronger if s[0] != name and s[2].covers(pattern)), None)
            if cover is not None:
                found.append(
                    f"network.hosts.{name} {text!r} is covered by the {cover[0]} rule "
                    f"{cover[1]!r}, which wins: the {name} rule has no effect"
                )
        stronger += [(name, text, HostPattern.parse(text)) for text in listed]
    return found
