"""Harness modules: headless command lines and stream parsers, against recorded streams that
follow each CLI's documented format (tests/data/streams), truncated and malformed lines
included."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddock.api.agentrun import AgentRunSpec, Harness
from paddock.harness import HARNESSES
from paddock.runs.events import Draft

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"


def parse_stream(harness: Harness) -> list[Draft]:
    parse = HARNESSES[harness].parse_line
    lines = (STREAMS / f"{harness}.jsonl").read_text().splitlines()
    return [draft for line in lines for draft in parse(line)]


def kinds(drafts: list[Draft]) -> list[str]:
    return [d.type for d in drafts]


def spec(harness: str, **fields: object) -> AgentRunSpec:
    return AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "s"}, "harness": harness, "prompt": "do it", **fields}
    )


def test_claude_stream_normalised() -> None:
    drafts = parse_stream(Harness.CLAUDE_CODE)
    assert kinds(drafts) == [
        "session-id", "message", "tool.call", "tool.result", "message", "error", "result",
        "error",
    ]  # fmt: skip
    assert drafts[0].data["sessionId"] == "5f1c2a9e-claude-session"
    call, result = drafts[2], drafts[3]
    assert call.data == {
        "id": "toolu_01",
        "name": "Bash",
        "input": {"command": "ls", "description": "List files"},
    }
    assert call.summary == "Bash: ls"
    assert result.data["id"] == "toolu_01"
    assert result.data["output"] == "README.md\nsrc"
    assert result.data["isError"] is False
    final = drafts[6].data
    assert final["costUsd"] == 0.0123
    assert (final["inputTokens"], final["outputTokens"]) == (1200, 85)
    assert final["isError"] is False
    assert drafts[5].data["line"] == "not json at all"
    assert drafts[7].data["reason"] == "MalformedLine"  # the truncated last line


def test_codex_stream_normalised() -> None:
    drafts = parse_stream(Harness.CODEX)
    assert kinds(drafts) == [
        "session-id", "tool.call", "tool.result", "tool.result", "message", "error", "result",
    ]  # fmt: skip
    assert drafts[0].data["sessionId"] == "0199a213-codex-thread"
    assert drafts[1].data["input"] == {"command": "bash -lc ls"}
    assert drafts[2].data["exitCode"] == 0
    assert drafts[2].data["isError"] is False
    assert drafts[3].data["changes"] == [{"path": "notes.md", "kind": "add"}]
    assert drafts[5].summary == "harness output line is not a JSON object"
    assert drafts[6].data["inputTokens"] == 2400


def test_opencode_stream_normalised() -> None:
    drafts = parse_stream(Harness.OPENCODE)
    assert kinds(drafts) == ["session-id", "tool.call", "tool.result", "message", "result",
                             "error"]  # fmt: skip
    assert drafts[0].data["sessionId"] == "ses_opencode01"
    assert drafts[4].data["costUsd"] == 0.004
    assert drafts[5].data["message"] == "rate limited"


def test_gemini_stream_normalised() -> None:
    drafts = parse_stream(Harness.GEMINI)
    assert kinds(drafts) == ["session-id", "tool.call", "tool.result", "message", "result"]
    assert drafts[0].data["sessionId"] == "gem-session-7"
    assert drafts[1].data["name"] == "run_shell_command"
    assert drafts[4].data["outputTokens"] == 50


@pytest.mark.parametrize("harness", [h for h in Harness if h != Harness.COMMAND])
@pytest.mark.parametrize(
    "line", ["", "{", '{"type": ', "null", "42", '"text"', "\x00\x01", '{"type": null}']
)
def test_bad_lines_never_raise(harness: Harness, line: str) -> None:
    drafts = HARNESSES[harness].parse_line(line)
    assert all(isinstance(d, Draft) for d in drafts)


def test_command_lines_are_output_events() -> None:
    assert HARNESSES[Harness.COMMAND].parse_line("hello") == [
        Draft("output", "hello", {"stream": "stdout", "text": "hello"})
    ]


@pytest.mark.parametrize(
    ("harness", "resume"),
    [
        ("claude-code", "--resume sess-1"),
        ("codex", "resume sess-1"),
        ("opencode", "--session sess-1"),
        ("gemini", "--resume sess-1"),
    ],
)
def test_resume_uses_each_clis_own_flag(harness: str, resume: str) -> None:
    script = HARNESSES[Harness(harness)].invocation(spec(harness, sessionId="sess-1")).script
    assert resume in script
    fresh = HARNESSES[Harness(harness)].invocation(spec(harness)).script
    assert "sess-1" not in fresh


@pytest.mark.parametrize("harness", ["claude-code", "codex", "opencode", "gemini"])
def test_model_is_passed_and_prompt_comes_from_the_prompt_file(harness: str) -> None:
    script = HARNESSES[Harness(harness)].invocation(spec(harness, model="m-1")).script
    assert "m-1" in script
    assert "$PADDOCK_PROMPT_FILE" in script
    assert "do it" not in script  # the prompt is never inlined into the script


def test_quoting_keeps_model_names_as_one_word() -> None:
    script = HARNESSES[Harness.CLAUDE_CODE].invocation(spec("claude-code", model="a b;rm")).script
    assert "'a b;rm'" in script
