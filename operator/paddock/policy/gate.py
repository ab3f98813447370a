"""The operator's exec gate: the commands it runs on a user's behalf (setup steps, a
``command`` run), judged before anything runs. Pure: the services act on the result."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.workspace import ParallelGroup, SetupCommand, WorkspaceSpec
from paddock.policy.engine import (
    UNRESTRICTED,
    Part,
    PartKind,
    Verdict,
    evaluate,
    file_write,
    printable,
    strictest,
)

MAX_SHOWN = 120  # characters of a command quoted in a message


@dataclass(frozen=True)
class Judged:
    """One command's verdict; ``where`` names it (``setup[2]``, ``command``)."""

    where: str
    command: str
    verdict: Verdict

    @property
    def decision(self) -> Decision:
        return self.verdict.decision

    def message(self, what: str, *, nothing_ran: bool = True) -> str:
        """Why it may not run, for a condition and an Event. ``what``: "Setup step setup[2]";
        ``nothing_ran``: say that nothing of it ran (not for a command refused while its
        agent runs on)."""
        shown = " ".join(self.command.split())
        if len(shown) > MAX_SHOWN:
            shown = shown[: MAX_SHOWN - 3] + "..."
        part = self.verdict.deciding
        why = f"{part.kind} `{part.text}` is {part.decision} by {part.rule}" if part else ""
        if self.decision == Decision.DENY:
            ran = " Nothing ran." if nothing_ran else ""
            return f"{what} `{shown}` is denied by the SandboxPolicy: {why}.{ran}"
        return (
            f"{what} `{shown}` needs approval: {why}. Paddock asks a person only about the "
            "commands of runs; allow this one in the SandboxPolicy, or change it."
        )


def setup_commands(workspace: WorkspaceSpec) -> Iterator[tuple[str, str]]:
    """Every command of the Workspace's setup, with where it is: ``setup[1]``,
    ``setup[2].parallel[0]``."""
    for index, step in enumerate(workspace.setup):
        if isinstance(step, ParallelGroup):
            for position, command in enumerate(step.parallel):
                yield f"setup[{index}].parallel[{position}]", command
        elif isinstance(step, SetupCommand):
            yield f"setup[{index}]", step.run
        else:
            yield f"setup[{index}]", step


def judge_setup(policy: SandboxPolicySpec | None, workspace: WorkspaceSpec) -> list[Judged]:
    """Every setup command's verdict, in order (no policy: everything that parses runs)."""
    rules = policy or UNRESTRICTED
    return [
        Judged(where, command, evaluate(rules, command, workspace.scripts))
        for where, command in setup_commands(workspace)
    ]


def blocking(judged: list[Judged]) -> Judged | None:
    """The command that keeps the rest from running: the first denied, else the first that
    needs approval; None when every one is allowed."""
    for decision in (Decision.DENY, Decision.ASK):
        for item in judged:
            if item.decision == decision:
                return item
    return None


def judge_command(
    policy: SandboxPolicySpec | None, command: str, scripts: dict[str, str]
) -> Judged:
    """The verdict on ``command``, judged as given; kept as it can be shown (a byte that is
    not UTF-8 escaped), for messages, Events and the log."""
    verdict = evaluate(policy or UNRESTRICTED, command, scripts)
    return Judged("command", printable(command), verdict)


def judge_writes(policy: SandboxPolicySpec, text: str, paths: tuple[str, ...]) -> Judged:
    """A harness tool that writes several files at once (``text``, a patch): each path judged
    as a file tool's write, the strictest decision the patch's."""
    parts = tuple(file_write(policy.capabilities, path, literal=True) for path in paths)
    verdict = Verdict(strictest(part.decision for part in parts), parts)
    return Judged(str(PartKind.FILE_WRITE), text, verdict)


def judge_capability(policy: SandboxPolicySpec, kind: PartKind, target: str) -> Judged:
    """A harness tool's own file write (``kind`` file-write, ``target`` its path) or web
    access (network, the URL or query): decided by ``capabilities``, and a write into a
    protected place (the gate's, a CLI's settings) denied whatever they say."""
    if kind == PartKind.FILE_WRITE:
        part = file_write(policy.capabilities, target, literal=True)
    else:
        part = Part(kind, target, policy.capabilities.network, "capabilities.network")
    return Judged(str(kind), target, Verdict(part.decision, (part,)))
