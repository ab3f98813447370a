"""What a model request used, as the gateway's model route reads it from each provider's own
response, streamed (server-sent events, cut anywhere) or whole; and what it cost by the price
table. The streams are the providers' documented shapes, as recorded; the route's counting of
them on the way through runs for real in tests/integration/test_model_route_server.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paddock.gateway.prices import PriceTable, Unreadable, read_prices
from paddock.gateway.usage import Usage, UsageCounter

SSE = "text/event-stream; charset=utf-8"


def _sse(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)


ANTHROPIC = _sse(
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 300,
                  "cache_read_input_tokens": 5000, "output_tokens": 1}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "Hello"}}),
    ("ping", {"type": "ping"}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 42}}),
    ("message_delta", {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 57}}),
    ("message_stop", {"type": "message_stop"}),
)  # fmt: skip
OPENAI = _sse(
    ("response.created", {"type": "response.created",
                          "response": {"id": "resp_1", "model": "gpt-5", "usage": None}}),
    ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Hi"}),
    ("response.completed", {"type": "response.completed", "response": {
        "id": "resp_1", "model": "gpt-5-2025-08-07", "status": "completed",
        "usage": {"input_tokens": 800, "input_tokens_details": {"cached_tokens": 200},
                  "output_tokens": 90, "output_tokens_details": {"reasoning_tokens": 64},
                  "total_tokens": 890}}}),
)  # fmt: skip
GEMINI = b"".join(
    b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n"
    for chunk in (
        {"candidates": [{"content": {"parts": [{"text": "He"}]}}],
         "modelVersion": "gemini-2.5-pro",
         "usageMetadata": {"promptTokenCount": 700, "candidatesTokenCount": 2,
                           "totalTokenCount": 702}},
        {"candidates": [{"content": {"parts": [{"text": "llo"}]}, "finishReason": "STOP"}],
         "modelVersion": "gemini-2.5-pro",
         "usageMetadata": {"promptTokenCount": 700, "candidatesTokenCount": 30,
                           "thoughtsTokenCount": 12, "totalTokenCount": 742}},
    )
)  # fmt: skip


def _counter(provider: str, body: bytes, content_type: str = SSE, cut: int = 0) -> UsageCounter:
    counter = UsageCounter(provider, content_type)
    pieces = [body[i : i + cut] for i in range(0, len(body), cut)] if cut else [body]
    for piece in pieces:
        counter.feed(piece)
    return counter


def _count(provider: str, body: bytes, content_type: str = SSE, cut: int = 0) -> Usage:
    return _counter(provider, body, content_type, cut).usage


@pytest.mark.parametrize("cut", [0, 1, 7, 100])
@pytest.mark.parametrize(
    ("provider", "body", "usage"),
    [
        ("anthropic", ANTHROPIC, Usage(6500, 57, "claude-sonnet-4-5-20250929")),
        ("openai", OPENAI, Usage(800, 90, "gpt-5-2025-08-07")),
        ("google", GEMINI, Usage(700, 42, "gemini-2.5-pro")),
    ],
)
def test_a_streamed_answer_is_counted_wherever_the_stream_is_cut(
    provider: str, body: bytes, usage: Usage, cut: int
) -> None:
    counter = _counter(provider, body, cut=cut)
    assert counter.usage == usage
    assert counter.counted


@pytest.mark.parametrize(
    ("provider", "body", "final"),
    [("anthropic", ANTHROPIC, b"message_delta"), ("openai", OPENAI, b"response.completed")],
)
def test_an_answer_its_client_left_before_its_final_usage_is_not_counted_whole(
    provider: str, body: bytes, final: bytes
) -> None:
    cut_short = body[: body.index(final)]
    assert not _counter(provider, cut_short).counted
    assert _counter(provider, body).counted


def test_a_chat_completion_is_counted_from_its_prompt_and_completion_tokens() -> None:
    body = {"object": "chat.completion", "model": "gpt-5",
            "usage": {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}}  # fmt: skip
    counter = _counter("openai", json.dumps(body).encode(), "application/json")
    assert counter.usage == Usage(30, 4, "gpt-5")
    assert counter.counted


@pytest.mark.parametrize(
    ("provider", "body", "usage"),
    [
        ("anthropic", {"type": "message", "model": "claude-haiku-4-5",
                       "usage": {"input_tokens": 10, "output_tokens": 5}},
         Usage(10, 5, "claude-haiku-4-5")),
        ("openai", {"object": "response", "model": "gpt-5",
                    "usage": {"input_tokens": 11, "output_tokens": 6}}, Usage(11, 6, "gpt-5")),
        ("google", {"modelVersion": "gemini-2.5-flash",
                    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7}},
         Usage(12, 7, "gemini-2.5-flash")),
    ],
)  # fmt: skip
def test_a_whole_json_answer_is_counted(provider: str, body: dict[str, Any], usage: Usage) -> None:
    assert _count(provider, json.dumps(body).encode(), "application/json", cut=3) == usage


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b'data: {"type": "message_start"}\n\n', b'{"error": {"message": "no"}}'],
)
def test_an_answer_without_usage_counts_no_tokens(body: bytes) -> None:
    assert _count("anthropic", body).tokens == 0
    assert _count("anthropic", body, "application/json").tokens == 0
    assert not _counter("anthropic", body).counted


TABLE = PriceTable.model_validate(
    {"models": {"claude-sonnet-4-5": {"inputPerMTok": 3, "outputPerMTok": 15},
                "claude-sonnet-4-5-preview": {"inputPerMTok": 99, "outputPerMTok": 99},
                "gpt-5": {"inputPerMTok": 1.25, "outputPerMTok": 10}}}
)  # fmt: skip


def test_a_request_is_priced_by_its_model_or_the_model_it_is_a_dated_form_of() -> None:
    assert TABLE.cost(Usage(1_000_000, 100_000, "claude-sonnet-4-5")) == pytest.approx(4.5)
    dated = Usage(2000, 1000, "claude-sonnet-4-5-20250929")
    assert TABLE.cost(dated) == pytest.approx((2000 * 3 + 1000 * 15) / 1e6)
    assert TABLE.cost(Usage(500, 500, "gpt-5-2025-08-07")) == pytest.approx(0.005625)
    assert TABLE.cost(Usage(500, 500, "models/gpt-5")) == pytest.approx(0.005625)
    assert TABLE.cost(Usage(1_000_000, 0, "claude-sonnet-4-5-preview")) == pytest.approx(99)


@pytest.mark.parametrize(
    "model",
    # Other models whose names start with a priced one: never priced as it (gpt-5-pro costs
    # about 12 times gpt-5).
    ["gpt-5-pro", "gpt-5-pro-2025-10-06", "gpt-5-mini", "gpt-5x", "claude-sonnet-4-5-preview-1",
     "claude-sonnet-4-5-20250929-fast", "gpt-5-20251"],
)  # fmt: skip
def test_a_model_is_never_priced_as_a_shorter_models_name(model: str) -> None:
    assert TABLE.cost(Usage(10, 10, model)) is None


def test_a_model_the_table_does_not_price_has_no_cost() -> None:
    assert TABLE.cost(Usage(10, 10, "some-other-model")) is None
    assert TABLE.cost(Usage(10, 10, "")) is None


def test_the_price_table_file_is_read_or_said_to_be_unreadable(tmp_path: Path) -> None:
    good = tmp_path / "prices.yaml"
    good.write_text("models:\n  gpt-5: {inputPerMTok: 1.25, outputPerMTok: 10}\n")
    table = read_prices(good)
    assert isinstance(table, PriceTable)
    assert table.cost(Usage(1_000_000, 0, "gpt-5")) == pytest.approx(1.25)
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  gpt-5: {inputPerMTok: -1, outputPerMTok: 10}\n")
    said = read_prices(bad)
    assert isinstance(said, Unreadable)
    assert "bad.yaml" in said.reason
    assert isinstance(read_prices(tmp_path / "missing.yaml"), Unreadable)
