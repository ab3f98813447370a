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
from paddock.policy import arith, builtins, environment
from paddock.policy.globs import (
    MAX_VANISHING,
    always_matches,
    could_match,
    forms,
    joined,
    vanishing,
)
from paddock.policy.outcomes import Runs, Shell, Unknown
from paddock.policy.protected import HOME, WORKSPACE, directory, protected_place, relative
from paddock.policy.redirects import NOT_FILES
from paddock.policy.shell import DYNAMIC, Evaluated, ShellSyntaxError, Word, parse
from paddock.policy.wrappers import judged_itself, runs

MAX_DEPTH = 8  # bash -c inside eval inside bash -c ...: deeper than this is denied
MAX_DIRECTORIES = 64  # directories a command may cd to, from which relative writes are read
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
    name a script, and then matches every part of a command that is exactly that script.
    Never raises: whatever fails in judging is a denial that says so."""
    # With no policy the pod is the boundary, and nothing is protected from a command either.
    protect = policy is not UNRESTRICTED
    try:
        judge = _Judge(policy.commands, policy.capabilities, dict(scripts or {}), protect)
        parts = judge.script(command, depth=0, aliases=judge.aliases(command))
        parts += judge.evaluated() + judge.file_writes()
    except Exception as exc:
        rule = f"Paddock could not judge it ({type(exc).__name__}), so it is denied"
        parts = [Part(PartKind.SYNTAX, printable(command.strip()), Decision.DENY, rule)]
    return Verdict(strictest(p.decision for p in parts), tuple(parts))


def printable(text: str) -> str:
    """``text`` as it can be shown: a byte that is not UTF-8 as an escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def file_write(
    capabilities: Capabilities,
    target: str,
    protect: bool = True,
    *,
    literal: bool = False,
    directories: tuple[str, ...] = (WORKSPACE,),
) -> Part:
    """A write of the file ``target`` (as written, a relative one from any of ``directories``;
    ``literal``: a file tool's path, which no shell expands): denied into a protected place
    (unless ``protect`` is off), else as ``capabilities.fileWrite`` says."""
    place = protected_place(target, literal=literal, directories=directories) if protect else None
    if place is not None:
        return Part(PartKind.FILE_WRITE, target, Decision.DENY, f"protected: {place}")
    return Part(PartKind.FILE_WRITE, target, capabilities.file_write, "capabilities.fileWrite")


def _normal(text: str) -> str:
    return " ".join(text.split())


def _home(glob: str) -> str:
    """A rule's ``~/`` as the command's words have it: the sandbox's HOME."""
    expanded = HOME + glob[1:] if glob == "~" or glob.startswith("~/") else glob
    return expanded.replace(" ~/", f" {HOME}/")


@dataclass
class _Judge:
    rules: CommandRules
    capabilities: Capabilities
    scripts: dict[str, str]
    protect: bool = True
    _normal_scripts: dict[str, str] = field(init=False)
    _rules: dict[Decision, list[tuple[str, str]]] = field(init=False)
    # Every text each variable is given, anywhere in the command (None: not known), and the
    # text bash evaluates again: judged once all of the command is read.
    values: dict[str, list[str | None]] = field(default_factory=dict)
    pending: list[Evaluated] = field(default_factory=list)
    # The files the command writes, judged once every directory it may cd to is known.
    writes: list[str] = field(default_factory=list)
    # Writes of /dev/fd/N whose script opened N onto no file: files where another did.
    descriptor_writes: list[tuple[str, str]] = field(default_factory=list)
    opened: set[str] = field(default_factory=set)
    directories: set[str] = field(default_factory=lambda: {WORKSPACE})
    moved: bool = False  # to a directory that is not known

    def __post_init__(self) -> None:
        self._normal_scripts = {name: _normal(cmd) for name, cmd in self.scripts.items()}
        # Each rule with its ~/ as the command's words have it, worked out once.
        self._rules = {
            decision: [(glob, _home(glob)) for glob in globs]
            for decision, globs in (
                (Decision.DENY, self.rules.deny),
                (Decision.ASK, self.rules.ask),
                (Decision.ALLOW, self.rules.allow),
            )
        }

    @property
    def anything(self) -> Decision:
        """The verdict on a command that cannot be told: the strictest any command could get
        (deny where some rule denies; allow only where nothing is denied or asked)."""
        could = [self.rules.default, self.capabilities.file_write]
        could += [Decision.DENY] * bool(self.rules.deny) + [Decision.ASK] * bool(self.rules.ask)
        return strictest(could)

    def aliases(self, text: str) -> frozenset[str]:
        """The scripts whose command is exactly ``text``."""
        normal = _normal(text)
        return frozenset(name for name, cmd in self._normal_scripts.items() if cmd == normal)

    def script(
        self, text: str, depth: int, aliases: frozenset[str], shell: Shell = Shell.BASH
    ) -> list[Part]:
        if depth > MAX_DEPTH:
            return [Part(PartKind.SYNTAX, text, Decision.DENY, "nested too deeply")]
        if shell == Shell.EITHER:
            return self.script(text, depth, aliases) + self.script(text, depth, aliases, Shell.DASH)
        try:
            parsed = parse(text, posix=shell == Shell.DASH)
        except ShellSyntaxError as exc:
            read = "unparsable as sh (dash)" if shell == Shell.DASH else "unparsable"
            return [Part(PartKind.SYNTAX, printable(text.strip()), Decision.DENY, f"{read}: {exc}")]
        parts = [Part(PartKind.SYNTAX, h.text, self.anything, h.reason) for h in parsed.hazards]
        self.pending += parsed.evaluated
        for name, value in parsed.values:
            parts += self.assigned(name, value, depth, aliases)
        for command in parsed.commands:
            own = aliases | self.aliases(command.source)
            parts += self.command(
                command.words,
                depth,
                own,
                command.stdin,
                command.stdin_file,
                command.declaration,
                shell,
            )
        self.writes += [w.target.shown for w in parsed.writes if w.descriptor is None]
        self.descriptor_writes += [
            (w.target.shown, w.descriptor) for w in parsed.writes if w.descriptor
        ]
        self.opened |= parsed.opened
        network = self.capabilities.network
        return parts + [
            Part(PartKind.NETWORK, c.shown, network, "capabilities.network")
            for c in parsed.connections
        ]

    def file_writes(self) -> list[Part]:
        """The files the command writes: a relative one from each directory it may be in."""
        directories = tuple(sorted(self.directories))
        self.writes += [t for t, fd in self.descriptor_writes if {fd, "*"} & self.opened]
        parts = [
            file_write(self.capabilities, target, self.protect, directories=directories)
            for target in self.writes
        ]
        moved = self.moved or {"CDPATH", "PWD", "OLDPWD"} & self.values.keys()
        if self.protect and (len(directories) > MAX_DIRECTORIES or moved):
            lost = "protected: from a directory Paddock does not follow (CDPATH, or many cd)"
            from_here = [t for t in self.writes if relative(t)]
            parts += [
                Part(PartKind.FILE_WRITE, target, Decision.DENY, lost) for target in from_here
            ]
        return parts

    def changes_directory(self, args: tuple[Word, ...]) -> None:
        """``cd DIR`` or ``pushd DIR``: DIR, from each directory the command may be in, is
        one more (no operand: HOME). One only known at run time is not followed (a relative
        write after it is read as from the others: the read-only mounts hold)."""
        operands = [
            w for w in args if not (w.literal and w.pattern.startswith("-") and w.pattern != "-")
        ]
        target = operands[0] if operands else Word(HOME, "~")
        if target.pattern == "-" or len(self.directories) > MAX_DIRECTORIES:
            return
        text = target.pattern if target.literal else target.shown
        reached = {directory(text, d) for d in self.directories}
        self.directories |= {d for d in reached if d is not None and "*" not in d}

    def assigned(
        self, name: str, value: str | None, depth: int, aliases: frozenset[str]
    ) -> list[Part]:
        """A variable given ``value``: remembered, and judged by what it makes run."""
        known = self.values.setdefault(name, [])
        if value not in known:
            known.append(value)
        effect = environment.effect(name, value)
        return [] if effect is None else self.wrapped(effect, depth, aliases)

    def evaluated(self) -> list[Part]:
        """The text bash evaluates again, judged with every value the command assigns."""
        parts = []
        memo: dict[tuple[str, str], str | None] = {}  # each variable is judged once
        for item in self.pending:
            problem = arith.unsafe(item.how, item.reading, self.values, memo)
            if problem:
                text = " ".join(item.source.split())
                parts.append(Part(PartKind.COMMAND, text, self.anything, problem))
        return parts

    def command(
        self,
        words: tuple[Word, ...],
        depth: int,
        aliases: frozenset[str],
        stdin: Word | None = None,
        stdin_file: bool = False,
        declaration: bool = False,
        shell: Shell = Shell.BASH,
    ) -> list[Part]:
        text = " ".join(word.shown for word in words)
        if not words[0].literal:
            rule = "dynamic command name: what runs is only known at run time"
            return [Part(PartKind.COMMAND, text, self.anything, rule)]
        if words[0].pattern in ("cd", "pushd"):
            self.changes_directory(words[1:])
        matched = self.match(words, aliases)
        inner = runs(words, stdin, stdin_file, shell)
        if inner is None or judged_itself(words[0]):
            decision, rule = matched or (self.rules.default, "default")
            own = [Part(PartKind.COMMAND, text, decision, rule)]
        else:  # a wrapper has no verdict of its own unless a rule names it
            own = [] if matched is None else [Part(PartKind.COMMAND, text, *matched)]
        for item in inner or []:
            own += self.wrapped(item, depth, aliases, shell)
        if not declaration:  # a declaration's names and values are read with the script
            found = builtins.effects(words)
            self.pending.append(Evaluated(text, found.reading))
            for name, value in found.assigned:
                own += self.assigned(name, value, depth, aliases)
            for item in found.runs:
                own += self.wrapped(item, depth, aliases, shell)
        return own

    def wrapped(
        self,
        item: Runs | Unknown,
        depth: int,
        aliases: frozenset[str],
        shell: Shell = Shell.BASH,
    ) -> list[Part]:
        """What a command runs: a script, read by its own shell; or words, run in the shell
        ``shell`` of the command that runs them (``command eval ...``)."""
        if isinstance(item, Unknown):
            if item.program:
                return [Part(PartKind.COMMAND, item.reason, self.rules.default, "default")]
            return [Part(PartKind.COMMAND, item.reason, self.anything, "cannot tell what runs")]
        parts: list[Part] = []
        self.writes += [target for target in item.writes if target not in NOT_FILES]
        if item.directory == "":  # find -execdir: each file's directory
            self.moved = True
        elif item.directory is not None and DYNAMIC not in item.directory:  # env -C DIR
            self.changes_directory((Word(item.directory, item.directory),))
        for name, value in item.environment:
            parts += self.assigned(name, value, depth, aliases)
        if item.script is not None:
            own = aliases | self.aliases(item.script)
            return parts + self.script(item.script, depth + 1, own, item.shell)
        words = item.words
        if not words:
            return parts
        if item.more_arguments:
            words = (*words, Word(DYNAMIC, "<arguments read at run time>", splits=True))
        return parts + self.command(
            words, depth + 1, aliases, item.stdin, item.stdin_file, shell=shell
        )

    def match(
        self, words: tuple[Word, ...], aliases: frozenset[str]
    ) -> tuple[Decision, str] | None:
        """The rule this one command matches, by precedence; None when it matches none.

        A deny or ask rule matches when the command could match it for some value of its
        run-time parts, and also by the command's bare name (``/usr/bin/curl`` is curl); an
        allow rule only when it matches whatever those parts are, and as written, and never
        a name holding white space (``'git status'`` is one program's name). A word that may
        expand to no word at all (``$X``, ``"$@"``) is matched both present and gone."""
        variants = vanishing(words)
        if variants is None:
            return self.anything, f"more than {MAX_VANISHING} words that may expand to none"
        for decision in (Decision.DENY, Decision.ASK):
            for glob, expanded in self._rules[decision]:
                if glob in aliases:
                    return decision, f"{decision}: {glob} (script)"
                if any(could_match(expanded, form) for v in variants for form in forms(v)):
                    return decision, f"{decision}: {glob}"
        for glob, expanded in self._rules[Decision.ALLOW]:
            if glob in aliases:
                return Decision.ALLOW, f"allow: {glob} (script)"
            if any(space.isspace() for space in words[0].pattern):
                break  # a name such as 'echo x' is a program of its own, not echo
            if all(always_matches(expanded, joined(variant)) for variant in variants):
                return Decision.ALLOW, f"allow: {glob}"
        return None
