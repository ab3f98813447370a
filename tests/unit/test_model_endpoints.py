"""What the model route forwards, decided on the request as it will be sent: one plain path,
an endpoint with its method, the token nowhere but where a key goes; what an inference
request holds of the budget; and the answer scrubbed of the key and the token."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx2
import pytest

from paddock.api.budget import Budget
from paddock.gateway import endpoints
from paddock.gateway.endpoints import Asked, asked, checked_path, endpoint_of
from paddock.gateway.model import Call, call_of, upstream_request
from paddock.gateway.relay import Passage
from paddock.policy.budgets import ADMITTED, Admission, Spent, admission, unpriced_refused
from paddock.render.model_routes import Route
from paddock.runs.scrubbing import SECRET_MASK, StreamScrubber

TOKEN = "paddock-the-runs-token"


def _route(provider: str = "openai") -> Route:
    return Route("digest", "sk-key", "https://api.example", provider, "team/r1", "team/box",
                 datetime(2027, 1, 1, tzinfo=UTC))  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b"/v1/messages", "/v1/messages"),
        (b"/v1/models/ft:gpt-4o:org::abc", "/v1/models/ft:gpt-4o:org::abc"),
        (b"/v1/m%65ssages", "/v1/messages"),  # an unreserved letter, decoded once
        (b"/v1beta/models/gemini-2.5-pro:streamGenerateContent",
         "/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
        # Refused: dot segments however spelled, encoded separators, backslashes, empty
        # segments, escapes of escapes, anything but a plain path.
        (b"/v1/models/..", None),
        (b"/v1/models/.", None),
        (b"/v1/models/%2e%2e", None),
        (b"/v1/models/%2E%2e/files", None),
        (b"/v1/responses/../input_items", None),
        (b"/v1/models/x%2f..%2ffiles", None),
        (b"/v1/models/x%3fkey=1", None),
        (b"/v1/models/x%23frag", None),
        (b"/v1/models/x%5c..", None),
        (b"/v1/models\\..\\files", None),
        (b"/v1//messages", None),
        (b"/v1/models/%252e%252e", None),
        (b"/v1/models/%", None),
        (b"/v1/models/%zz", None),
        (b"/v1/models/x y", None),
        (b"/v1/models/\xc3\xa9", None),
        (b"v1/messages", None),
        (b"", None),
    ],
)  # fmt: skip
def test_a_path_is_read_once_and_refused_unless_plain(raw: bytes, path: str | None) -> None:
    assert checked_path(raw) == path


@pytest.mark.parametrize(
    ("provider", "method", "path", "forwarded"),
    [
        ("anthropic", "POST", "/v1/messages", True),
        ("anthropic", "POST", "/v1/messages/count_tokens", True),
        ("anthropic", "GET", "/v1/models", True),
        ("anthropic", "GET", "/v1/models/claude-sonnet-4-5", True),
        ("anthropic", "GET", "/v1/messages", False),
        ("anthropic", "DELETE", "/v1/models/claude-sonnet-4-5", False),
        ("anthropic", "POST", "/v1/models", False),
        ("anthropic", "POST", "/v1/files", False),
        ("anthropic", "POST", "/v1/messages/batches", False),
        ("anthropic", "GET", "/v1/organizations/api_keys", False),
        ("openai", "POST", "/v1/responses", True),
        ("openai", "POST", "/v1/responses/compact", True),
        ("openai", "POST", "/v1/responses/input_tokens", True),
        ("openai", "POST", "/v1/chat/completions", True),
        ("openai", "GET", "/v1/models", True),
        ("openai", "GET", "/v1/models/ft:gpt-4o:org::abc", True),
        ("openai", "DELETE", "/v1/models/ft:gpt-4o:org::abc", False),
        ("openai", "PUT", "/v1/models/gpt-5", False),
        ("openai", "PATCH", "/v1/models/gpt-5", False),
        ("openai", "DELETE", "/v1/responses/resp_1", False),
        ("openai", "GET", "/v1/responses/resp_1/input_items", False),
        ("openai", "POST", "/v1/responses/resp_1/cancel", False),
        ("openai", "POST", "/v1/files", False),
        ("openai", "POST", "/v1/fine_tuning/jobs", False),
        ("google", "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", True),
        ("google", "POST", "/v1beta/models/gemini-2.5-pro:generateContent", True),
        ("google", "POST", "/v1beta/models/gemini-2.5-pro:countTokens", True),
        ("google", "GET", "/v1beta/models", True),
        ("google", "GET", "/v1beta/models/gemini-2.5-pro", True),
        ("google", "DELETE", "/v1beta/models/gemini-2.5-pro", False),
        ("google", "GET", "/v1beta/models/gemini-2.5-pro:generateContent", False),
        ("google", "POST", "/v1beta/files", False),
        ("google", "POST", "/v1beta/tunedModels/x:generateContent", False),
        ("other", "POST", "/v1/messages", False),
    ],
)
def test_the_route_forwards_each_endpoint_with_its_method_only(
    provider: str, method: str, path: str, forwarded: bool
) -> None:
    assert (endpoint_of(provider, method, path) is not None) is forwarded


def test_the_token_anywhere_but_where_a_key_goes_refuses_the_request() -> None:
    route = _route("anthropic")
    plain = call_of(route, "POST", b"/v1/messages", "beta=true&key=" + TOKEN,
                    [("x-api-key", TOKEN)], TOKEN)  # fmt: skip
    assert isinstance(plain, Call)
    assert plain.query == [("beta", "true")]  # the key parameter is dropped
    for query, headers in [
        (f"beta={TOKEN}", [("x-api-key", TOKEN)]),
        ("", [("x-api-key", TOKEN), ("x-forward", f"t={TOKEN}")]),
        (f"x={TOKEN[:10]}%{ord(TOKEN[10]):02X}{TOKEN[11:]}", [("x-api-key", TOKEN)]),  # encoded
    ]:
        refused = call_of(route, "POST", b"/v1/messages", query, headers, TOKEN)
        assert isinstance(refused, str), (query, headers)
        assert "token" in refused, (query, headers)
    assert "not an endpoint" in str(call_of(route, "DELETE", b"/v1/models/x", "", [], TOKEN))
    assert "not a plain one" in str(call_of(route, "GET", b"/v1/models/%2e%2e", "", [], TOKEN))


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def test_an_inference_request_holds_its_size_and_output_limit() -> None:
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 500}, indent=2).encode()
    sent = _json({"model": "claude-sonnet-4-5", "max_tokens": 500})  # written again, as read
    assert asked("anthropic", "/v1/messages", body) == Asked("claude-sonnet-4-5", 500, sent)
    codex = _json({"model": "gpt-5", "input": []})
    assert asked("openai", "/v1/responses", codex) == Asked(
        "gpt-5", endpoints.DEFAULT_MAX_OUTPUT["openai"], codex
    )
    gemini = _json({"generationConfig": {"maxOutputTokens": 99, "candidateCount": 3}})
    found = asked("google", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", gemini)
    assert found == Asked("gemini-2.5-pro", 297, gemini)  # three answers of 99
    # The largest of the limits it names, times the answers it asks for.
    chat = _json({"model": "gpt-5", "max_output_tokens": 1, "max_tokens": 9000, "n": 2})
    assert asked("openai", "/v1/chat/completions", chat) == Asked("gpt-5", 18000, chat)
    assert asked("openai", "/v1/responses", b"[1]") == "the request's body is not a JSON object"
    assert asked("openai", "/v1/responses", b"{") == "the request's body is not JSON"
    assert asked("openai", "/v1/responses", b'{"model": NaN}') == "the request's body is not JSON"
    assert asked("anthropic", "/v1/messages", b"{}") == "the request names no model"
    twice = b'{"model": "m", "max_tokens": 5, "max_tokens": 99999}'
    assert asked("anthropic", "/v1/messages", twice) == "the request's body names a field twice"
    # Any text survives being written again; a count past any model's is held as the largest.
    lone = asked("anthropic", "/v1/messages", b'{"model": "m", "messages": "\\ud800"}')
    assert isinstance(lone, Asked)
    assert json.loads(lone.body)["messages"] == "\ud800"
    huge = asked("openai", "/v1/chat/completions", _json({"model": "m", "max_tokens": 10**400,
                                                         "n": 10**200}))  # fmt: skip
    assert isinstance(huge, Asked)
    assert huge.max_output == endpoints.MAX_COUNT


@pytest.mark.parametrize(
    ("provider", "request_", "alone"),
    [
        ("anthropic", {"messages": [{"role": "user", "content": "hi"}],
                       "tools": [{"name": "Bash", "input_schema": {"properties": {
                           "url": {"type": "string"}}}}]}, False),
        ("anthropic", {"messages": [{"content": [{"type": "document", "source": {
            "type": "url", "url": "https://example.com/big.pdf"}}]}]}, True),
        # A client tool's call and result hold a URL as text: nothing the provider fetches.
        ("anthropic", {"messages": [{"content": [
            {"type": "tool_use", "name": "WebFetch", "input": {"url": "https://x.example"}},
            {"type": "tool_result", "content": "https://x.example says hi"}]}],
            "tools": [{"name": "WebFetch", "input_schema": {"properties": {
                "container": {}, "file_id": {}}}}]}, False),
        ("anthropic", {"tools": [{"type": "bash_20250124", "name": "bash"},
                                 {"type": "text_editor_20250728", "name": "str_replace"}]}, False),
        ("openai", {"input": [{"type": "function_call", "arguments": '{"url": "https://x"}'},
                              {"type": "function_call_output", "output": "file_id"}],
                    "tools": [{"type": "local_shell"}, {"type": "custom", "name": "apply_patch"}]},
         False),
        ("openai", {"messages": [{"content": [{"type": "image_url",
                                               "image_url": {"url": "https://x.example/a.png"}}]}]},
         True),
        ("openai", {"messages": [{"content": [{"type": "image_url", "image_url": {
            "url": "data:image/png;base64,AAAA"}}]}]}, False),
        ("google", {"contents": [{"parts": [{"functionCall": {"args": {"fileUri": "https://x"}}}]}]},
         False),
        ("anthropic", {"mcp_servers": [{"url": "https://mcp.example"}]}, True),
        ("anthropic", {"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, True),
        ("openai", {"previous_response_id": "resp_1"}, True),
        ("openai", {"input": [{"type": "input_file", "file_id": "file-1"}]}, True),
        ("openai", {"tools": [{"type": "function", "name": "shell"}]}, False),
        ("openai", {"tools": [{"type": "web_search"}]}, True),
        ("google", {"contents": [{"parts": [{"fileData": {"fileUri": "https://youtu.be/x"}}]}]},
         True),
        ("google", {"cachedContent": "cachedContents/1"}, True),
        ("google", {"tools": [{"functionDeclarations": []}]}, False),
        ("google", {"tools": [{"googleSearch": {}}]}, True),
    ],
)  # fmt: skip
def test_a_request_that_refers_to_content_apart_from_it_runs_alone(
    provider: str, request_: dict[str, object], alone: bool
) -> None:
    path = "/v1beta/models/g:generateContent" if provider == "google" else "/v1/messages"
    found = asked(provider, path, _json({"model": "m", **request_}))
    assert isinstance(found, Asked)
    assert found.alone is alone


def test_a_streamed_chat_completion_is_asked_for_its_usage() -> None:
    body = _json({"model": "gpt-5", "stream": True, "stream_options": {"x": 1}})
    found = asked("openai", "/v1/chat/completions", body)
    assert isinstance(found, Asked)
    assert json.loads(found.body)["stream_options"] == {"x": 1, "include_usage": True}
    whole = _json({"model": "gpt-5"})
    assert asked("openai", "/v1/chat/completions", whole) == Asked("gpt-5", 128_000, whole)


def test_only_the_query_a_cli_sends_and_no_header_that_makes_another_request_goes_on() -> None:
    route = _route("google")
    path = b"/v1beta/models/g:streamGenerateContent"
    query = "alt=sse&$alt=proto&fields=candidates&key=k&callback=f"
    call = call_of(route, "POST", path, query, [], TOKEN)
    assert isinstance(call, Call)
    assert call.query == [("alt", "sse")]
    assert call_of(route, "POST", path, "alt=proto", [], TOKEN).query == []  # type: ignore[union-attr]
    sent = [("X-HTTP-Method-Override", "DELETE"), ("OpenAI-Organization", "org-2"),
            ("X-Goog-FieldMask", "candidates"), ("user-agent", "gemini-cli")]  # fmt: skip
    _, headers = upstream_request(route, call, sent)
    assert [k for k, _ in headers] == ["user-agent", "accept-encoding", "x-goog-api-key"]


def test_the_token_in_the_path_refuses_the_request() -> None:
    path = f"/v1/models/{TOKEN}".encode()
    refused = call_of(_route("anthropic"), "GET", path, "", [("x-api-key", TOKEN)], TOKEN)
    assert isinstance(refused, str)
    assert "token" in refused


BUDGET = Budget(tokens=1000)
ONE = Spent(input_tokens=300, output_tokens=300, model_requests=1)


@pytest.mark.parametrize(
    ("spent", "flying", "own", "verdict"),
    [
        (Spent(), Spent(), Spent(5000, 5000), ADMITTED),  # alone: let through, whatever it holds
        (Spent(900), Spent(), Spent(5000), ADMITTED),
        (Spent(1000), Spent(), Spent(1), Admission(refused="tokens 1000 of 1000")),
        (Spent(), ONE, Spent(300, 100), ADMITTED),  # 1000: all of them fit
        (Spent(), ONE, Spent(300, 101), Admission(waits=True)),
        (Spent(100), ONE, Spent(300, 1), Admission(waits=True)),
        (Spent(1000), ONE, Spent(1), Admission(refused="tokens 1000 of 1000")),
    ],
)
def test_requests_in_parallel_pass_while_all_of_them_fit_and_one_alone_always(
    spent: Spent, flying: Spent, own: Spent, verdict: Admission
) -> None:
    assert admission(BUDGET, spent, flying, own) == verdict


def test_no_budget_admits_everything_in_parallel() -> None:
    assert admission(None, Spent(10**9), ONE, Spent(10**9)) == ADMITTED


def test_a_model_without_a_price_is_refused_where_a_cost_ceiling_applies() -> None:
    cost = Budget(costUSD=1)
    assert unpriced_refused((cost, None), "m", priced=False).startswith("costUSD")
    assert unpriced_refused((None, cost), "m", priced=False).startswith("costUSD")  # the day's
    assert unpriced_refused((cost, None), "m", priced=True) == ""
    assert unpriced_refused((Budget(tokens=5), None), "m", priced=False) == ""
    assert unpriced_refused((None, None), "m", priced=False) == ""


KEY = "sk-ant-api03-the-real-key"


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 11, 64])
def test_an_answer_is_scrubbed_of_the_key_wherever_it_is_cut(cut: int) -> None:
    answer = (
        f'data: {{"error": "bad header x-api-key: {KEY}"}}\n\n'
        f"event: echo\ndata: {TOKEN} and {KEY}{KEY}\n\n"
        f"no newline at the end {KEY}"
    ).encode()
    scrubber = StreamScrubber([KEY, TOKEN])
    out = b"".join(scrubber.feed(answer[i : i + cut]) for i in range(0, len(answer), cut))
    out += scrubber.end()
    text = out.decode()
    assert KEY not in text
    assert TOKEN not in text
    assert KEY[:12] not in text  # (no piece of it either)
    assert text.count(SECRET_MASK) == 5
    assert text.startswith('data: {"error": "bad header x-api-key: ')


def test_a_line_passes_whole_at_once_and_the_header_values_are_scrubbed() -> None:
    scrubber = StreamScrubber([KEY])
    assert scrubber.feed(b"event: ping\ndata: {}\n\n") == b"event: ping\ndata: {}\n\n"
    assert scrubber.feed(b"data: sk-ant") == b""  # (could be the key's start: held)
    assert scrubber.feed(b"-other\n") == b"data: sk-ant-other\n"
    assert scrubber.header(f"echo {KEY}") == f"echo {SECRET_MASK}"


def test_repeated_answer_headers_come_back_each_and_scrubbed() -> None:
    route = Route("digest", KEY, "https://api.example", "anthropic", "team/r1", "team/box",
                  datetime(2027, 1, 1, tzinfo=UTC))  # fmt: skip
    response = httpx2.Response(200, headers=[
        ("set-cookie", "a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT"), ("set-cookie", "b=2"),
        ("x-echo", f"key {KEY} token {TOKEN}"), ("content-length", "5"),
    ])  # fmt: skip
    passage = Passage(route, response, TOKEN, True, Spent(), "POST /v1/messages")
    assert passage.headers() == [
        (b"set-cookie", b"a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT"),
        (b"set-cookie", b"b=2"),
        (b"x-echo", f"key {SECRET_MASK} token {SECRET_MASK}".encode()),
    ]
