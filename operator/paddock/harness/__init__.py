"""One module per harness: its headless command line, its environment, and a parser from its
stream format to Paddock's events."""

from __future__ import annotations

from paddock.api.agentrun import Harness as HarnessName
from paddock.harness import claude_code, codex, command, gemini, opencode
from paddock.harness.base import Harness, Invocation

HARNESSES: dict[HarnessName, Harness] = {
    HarnessName.COMMAND: command.HARNESS,
    HarnessName.CLAUDE_CODE: claude_code.HARNESS,
    HarnessName.CODEX: codex.HARNESS,
    HarnessName.OPENCODE: opencode.HARNESS,
    HarnessName.GEMINI: gemini.HARNESS,
}

__all__ = ["HARNESSES", "Harness", "Invocation"]
