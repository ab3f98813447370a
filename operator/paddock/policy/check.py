"""Rules that cannot work as written: what a SandboxPolicy's Valid condition reports.

The schema already refuses what no policy may hold (an empty glob, a CIDR with host bits).
These rules are accepted, and applied as written, but they can never match what their author
meant, so the policy says so instead of silently never applying them.
"""

from __future__ import annotations

import ipaddress

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.policy.hosts import host_problems

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
    return found + host_problems(spec)


# Commands that run what files of the workspace say: an interpreter given a file, or a runner
# of the project's own scripts, targets and tests.
INTERPRETERS = frozenset(
    {"bash", "sh", "dash", "zsh", "ksh", "source", ".", "python", "python3", "node", "deno",
     "bun", "ruby", "perl", "php", "lua", "Rscript"}
)  # fmt: skip
RUNNERS = frozenset(
    {"npm", "npx", "yarn", "pnpm", "make", "pytest", "tox", "nox", "go", "cargo", "gradle",
     "mvn", "rake", "bundle", "just", "task", "poetry", "uv", "pip", "pip3"}
)  # fmt: skip


def warnings(spec: SandboxPolicySpec) -> list[str]:
    """One sentence per allow rule that runs files of the workspace while the agent may write
    files: the agent can rewrite such a file, then run anything through the rule."""
    if spec.capabilities.file_write != Decision.ALLOW:
        return []
    return [
        f"commands.allow[{index}] {glob!r} runs files of the workspace, and "
        "capabilities.fileWrite is allow: an agent that rewrites such a file runs anything "
        "through this rule (set fileWrite to ask or deny, or allow only commands that run "
        "no workspace file)"
        for index, glob in enumerate(spec.commands.allow)
        if _runs_workspace_files(glob)
    ]


def _runs_workspace_files(glob: str) -> bool:
    words = glob.split()
    if not words:
        return False
    first = words[0]
    if first.startswith("./") or ("/" in first and not first.startswith("/")) or first == "*":
        return True
    name = first.rsplit("/", 1)[-1].rstrip("*")
    if name in RUNNERS:
        return True
    operands = [word for word in words[1:] if not word.startswith("-")]
    return name in INTERPRETERS and bool(operands) and not operands[0].startswith("/")


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
