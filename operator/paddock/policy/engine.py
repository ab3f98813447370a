"""Judging a shell command against a SandboxPolicy: ``evaluate(policy, command) -> Verdict``.

Every simple command is judged wherever it sits (lists, pipelines, subshells, substitutions,
here-documents, function bodies, the text given to ``eval`` or ``bash -c``, and the command a
wrapper such as ``timeout`` or ``xargs`` runs), and every redirection that writes a file is
judged by ``capabilities.fileWrite`` (a write into a protected place, where the gate and the
CLIs' settings live, is denied whatever it says). The verdict is the strictest of its parts:
deny > ask > allow. Within one command, rules take precedence deny > ask > allow >
``commands.default``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from paddock.api.policy import Capabilities, CommandRules, Decision, SandboxPolicySpec
from paddock.policy.globs import always_matches, could_match
from paddock.policy.protected import protected_place
from paddock.policy.shell import DYNAMIC, ShellSyntaxError, Word, parse
from paddock.policy.wrappers import JUDGED_ITSELF, Runs, Unknown, runs

MAX_DEPTH = 8  # bash -c inside eval inside bash -c ...: deeper than this is denied
STRICTNESS = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}
# What a sandbox with no SandboxPolicy may do: anything (the NetworkPolicy still applies).
UNRESTRICTED = SandboxPolicySpec(
    commands=CommandRules(default=Decision.ALLOW),
    capabilities=Capabilities(file_write=Decision.ALLOW),
)


class PartKind(StrEnum):
    COMMAND = "command"
    FILE_WRITE = "file-write"
    NETWORK = "network"
    SYNTAX = "syntax"


@dataclass(frozen=True)
class Part:
    """One judged piece of a command and the rule that decided it."""

    kind: PartKind
    text: str
    decision: Decision
    rule: str  # "deny: curl*", "default", "capabilities.fileWrite", "dynamic command name", ...

    def describe(self) -> str:
        return f"{self.kind} `{self.text}`: {self.decision} by {self.rule}"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    parts: tuple[Part, ...]

    @property
    def deciding(self) -> Part | None:
        """The first part that made the verdict what it is (None: allowed, nothing to run)."""
        return next((p for p in self.parts if p.decision == self.decision), None)

    def explain(self) -> str:
        """One line: the verdict, and the part and rule that decided it."""
        part = self.deciding
        if part is None:
            return f"{self.decision}: nothing to run"
        if self.decision == Decision.ALLOW:
            return f"allow: every part is allowed ({len(self.parts)} checked)"
        return f"{self.decision}: {part.kind} `{part.text}` ({part.rule})"

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": str(self.decision),
            "parts": [
                {"kind": str(p.kind), "text": p.text, "decision": str(p.decision), "rule": p.rule}
                for p in self.parts
            ],
        }


def strictest(decisions: Iterable[Decision]) -> Decision:
    return max(decisions, key=STRICTNESS.__getitem__, default=Decision.ALLOW)


def evaluate(
    policy: SandboxPolicySpec, command: str, scripts: Mapping[str, str] | None = None
) -> Verdict:
    """The verdict on ``command``. ``scripts`` are the Workspace's named commands: a rule may
    name a script, and then matches every part of a command that is exactly that script."""
    # With no policy the pod is the boundary, and nothing is protected from a command either.
    protect = policy is not UNRESTRICTED
    judge = _Judge(policy.commands, policy.capabilities, dict(scripts or {}), protect)
    parts = judge.script(command, depth=0, aliases=judge.aliases(command))
    return Verdict(strictest(p.decision for p in parts), tuple(parts))


def file_write(capabilities: Capabilities, target: str, protect: bool = True) -> Part:
    """A write of the file ``target`` (as written): denied into a protected place (unless
    ``protect`` is off), else as ``capabilities.fileWrite`` says."""
    place = protected_place(target) if protect else None
    if place is not None:
        return Part(PartKind.FILE_WRITE, target, Decision.DENY, f"protected: {place}")
    return Part(PartKind.FILE_WRITE, target, capabilities.file_write, "capabilities.fileWrite")


def _normal(text: str) -> str:
    return " ".join(text.split())


@dataclass
class _Judge:
    rules: CommandRules
    capabilities: Capabilities
    scripts: dict[str, str]
    protect: bool = True
    _normal_scripts: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self._normal_scripts = {name: _normal(cmd) for name, cmd in self.scripts.items()}

    def aliases(self, text: str) -> frozenset[str]:
        """The scripts whose command is exactly ``text``."""
        normal = _normal(text)
        return frozenset(name for name, cmd in self._normal_scripts.items() if cmd == normal)

    def script(self, text: str, depth: int, aliases: frozenset[str]) -> list[Part]:
        if depth > MAX_DEPTH:
            return [Part(PartKind.SYNTAX, text, Decision.DENY, "nested too deeply")]
        try:
            parsed = parse(text)
        except ShellSyntaxError as exc:
            return [Part(PartKind.SYNTAX, text.strip(), Decision.DENY, f"unparsable: {exc}")]
        parts: list[Part] = []
        for command in parsed.commands:
            own = aliases | self.aliases(command.source)
            parts += self.command(command.words, depth, own, command.stdin)
        for write in parsed.writes:
            parts.append(file_write(self.capabilities, write.target.shown, self.protect))
        return parts

    def command(
        self,
        words: tuple[Word, ...],
        depth: int,
        aliases: frozenset[str],
        stdin: Word | None = None,
    ) -> list[Part]:
        text = " ".join(word.shown for word in words)
        if not words[0].literal:
            rule = "dynamic command name: what runs is only known at run time"
            return [Part(PartKind.COMMAND, text, Decision.DENY, rule)]
        matched = self.match(words, aliases)
        inner = runs(words, stdin)
        if inner is None or words[0].pattern.rsplit("/", 1)[-1] in JUDGED_ITSELF:
            decision, rule = matched or (self.rules.default, "default")
            own = [Part(PartKind.COMMAND, text, decision, rule)]
        else:  # a wrapper has no verdict of its own unless a rule names it
            own = [] if matched is None else [Part(PartKind.COMMAND, text, *matched)]
        for item in inner or []:
            own += self.wrapped(item, depth, aliases)
        return own

    def wrapped(self, item: Runs | Unknown, depth: int, aliases: frozenset[str]) -> list[Part]:
        if isinstance(item, Unknown):
            return [Part(PartKind.COMMAND, item.reason, Decision.DENY, "cannot tell what runs")]
        if item.script is not None:
            return self.script(item.script, depth + 1, aliases | self.aliases(item.script))
        words = item.words
        if item.more_arguments:
            words = (*words, Word(DYNAMIC, "<arguments read at run time>"))
        return self.command(words, depth + 1, aliases, item.stdin)

    def match(
        self, words: tuple[Word, ...], aliases: frozenset[str]
    ) -> tuple[Decision, str] | None:
        """The rule this one command matches, by precedence; None when it matches none.

        A deny or ask rule matches when the command could match it for some value of its
        run-time parts, and also by the command's bare name (``/usr/bin/curl`` is curl); an
        allow rule only when it matches whatever those parts are, and as written."""
        written = " ".join(word.pattern for word in words)
        bare = " ".join((words[0].pattern.rsplit("/", 1)[-1], *(w.pattern for w in words[1:])))
        for decision, globs in ((Decision.DENY, self.rules.deny), (Decision.ASK, self.rules.ask)):
            for glob in globs:
                if glob in aliases:
                    return decision, f"{decision}: {glob} (script)"
                if could_match(glob, written) or could_match(glob, bare):
                    return decision, f"{decision}: {glob}"
        for glob in self.rules.allow:
            if glob in aliases:
                return Decision.ALLOW, f"allow: {glob} (script)"
            if always_matches(glob, written):
                return Decision.ALLOW, f"allow: {glob}"
        return None
