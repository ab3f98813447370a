"""Rules that cannot work as written: what a SandboxPolicy's Valid condition reports.

The schema already refuses what no policy may hold (an empty glob, a CIDR with host bits).
These rules are accepted, and applied as written, but they can never match what their author
meant, so the policy says so instead of silently never applying them.
"""

from __future__ import annotations

import ipaddress

from paddock.api.policy import SandboxPolicySpec

# A command is split at these before its parts are matched: a rule holding one describes
# two commands and matches neither.
SPLITTERS = ("&&", "||", ";", "\n", "$(", "`", "|")
QUOTES = ("'", '"', "\\")


def problems(spec: SandboxPolicySpec) -> list[str]:
    """One sentence per rule that cannot work, naming the field and the rule."""
    found: list[str] = []
    rules = spec.commands
    for list_name, globs in (("allow", rules.allow), ("ask", rules.ask), ("deny", rules.deny)):
        for index, glob in enumerate(globs):
            problem = _glob_problem(glob)
            if problem:
                found.append(f"commands.{list_name}[{index}] {glob!r} {problem}")
    for glob in rules.allow:
        for stricter, globs in (("deny", rules.deny), ("ask", rules.ask)):
            if glob in globs:
                found.append(
                    f"commands.allow {glob!r} is also an {stricter} rule, which wins: "
                    "the allow rule has no effect"
                )
    for index, rule in enumerate(spec.network.egress):
        for cidr in rule.cidrs:
            if ipaddress.ip_network(cidr).is_loopback:
                found.append(_loopback(index, cidr))
    return found


def _glob_problem(glob: str) -> str | None:
    if glob != glob.strip():
        return "starts or ends with white space; commands are matched without it"
    if "  " in glob:
        return "holds two spaces in a row; a command's words are joined by one space"
    for splitter in SPLITTERS:
        if splitter in glob:
            shown = "a newline" if splitter == "\n" else repr(splitter)
            return (
                f"holds {shown}: commands are split there before each part is matched, "
                "so write one rule per command"
            )
    if any(quote in glob for quote in QUOTES):
        return "holds a quote or backslash: they are removed from commands before matching"
    return None


def _loopback(index: int, cidr: str) -> str:
    return (
        f"network.egress[{index}] {cidr} is loopback, which NetworkPolicies never restrict: "
        "the rule has no effect"
    )
