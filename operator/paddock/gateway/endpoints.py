"""What the model route forwards, decided on the request exactly as it will be sent. Pure.

A request's path is read once, from its raw bytes: a percent-escape is decoded only where it
spells an unreserved character (a letter, a digit, ``-._~``); any other escape (an encoded
``/``, ``?``, ``#``, ``%`` or ``\\``), a dot segment (``.``, ``..``), an empty segment, a
backslash or any other character than those a model's name or an endpoint holds refuses the
request. What passes is the path forwarded, character for character: nothing after the check
can turn it into another path or a query.

Each provider's endpoints are a method and a path: POST for inference and for counting tokens,
GET for the model list and one model. Nothing else (files, batches, fine-tuning, deleting a
model or a stored response, administration) is forwarded, whatever the method.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from typing import Any

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_SEGMENT = re.compile(r"[A-Za-z0-9._~:-]+")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_ID = r"[A-Za-z0-9][A-Za-z0-9._:~-]*"  # a model (ft:gpt-4o:org::id), not a dot segment
_GEMINI_ID = r"[A-Za-z0-9][A-Za-z0-9._~-]*"
_GEMINI = r"/v1(beta|alpha)?/models"
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # the providers' own limit on a request
# Output tokens reserved for an answer whose request names no maximum: the largest the
# provider's current models give (Anthropic's API requires max_tokens).
DEFAULT_MAX_OUTPUT = {"anthropic": 64_000, "openai": 128_000, "google": 65_536}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: re.Pattern[str]
    inference: bool = False  # an answer of the model, which costs; else a count or a list


def _endpoint(method: str, path: str, inference: bool = False) -> Endpoint:
    return Endpoint(method, re.compile(path), inference)


ENDPOINTS: dict[str, tuple[Endpoint, ...]] = {
    "anthropic": (
        _endpoint("POST", r"/v1/messages", inference=True),
        _endpoint("POST", r"/v1/messages/count_tokens"),
        _endpoint("GET", r"/v1/models"),
        _endpoint("GET", rf"/v1/models/{_ID}"),
    ),
    "openai": (
        _endpoint("POST", r"/v1/responses", inference=True),
        _endpoint("POST", r"/v1/responses/compact", inference=True),  # Codex's compaction
        _endpoint("POST", r"/v1/responses/input_tokens"),
        _endpoint("POST", r"/v1/chat/completions", inference=True),
        _endpoint("GET", r"/v1/models"),
        _endpoint("GET", rf"/v1/models/{_ID}"),
    ),
    "google": (
        _endpoint("POST", rf"{_GEMINI}/{_GEMINI_ID}:(generateContent|streamGenerateContent)", True),
        _endpoint("POST", rf"{_GEMINI}/{_GEMINI_ID}:countTokens"),
        _endpoint("GET", _GEMINI),
        _endpoint("GET", rf"{_GEMINI}/{_GEMINI_ID}"),
    ),
}


def checked_path(raw: bytes) -> str | None:
    """The request's path as it will be forwarded, from its raw bytes; None when it is not one
    plain path (see the module's docstring)."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if "%" in text:
        unreserved = [chr(int(code, 16)) for code in _ESCAPE.findall(text)]
        if text.count("%") != len(unreserved) or not set(unreserved) <= UNRESERVED:
            return None
        text = _ESCAPE.sub(lambda m: chr(int(m[1], 16)), text)
    segments = text.split("/")
    if segments[0] != "" or len(segments) < 2:
        return None
    if any(s in (".", "..") or not _SEGMENT.fullmatch(s) for s in segments[1:]):
        return None
    return text


def endpoint_of(provider: str, method: str, path: str) -> Endpoint | None:
    """The endpoint of the provider's API a checked path and its method are, if one."""
    for found in ENDPOINTS.get(provider, ()):
        if found.method == method and found.path.fullmatch(path):
            return found
    return None


@dataclass(frozen=True)
class Asked:
    """What an inference request asks for: its model, the most output tokens it may be
    answered with, its body as it will be sent, and whether it refers to content its body
    does not hold (``alone``: what it uses is not bounded by its size)."""

    model: str
    max_output: int
    body: bytes
    alone: bool = False


# Fields of the request whose content the provider fetches or keeps apart from it: a stored
# response or conversation, a cache, a remote MCP server, a container.
ELSEWHERE = frozenset({
    "previous_response_id", "conversation", "cachedContent", "cached_content", "mcp_servers",
    "container",
})  # fmt: skip
# In the content of the messages: a file by its id, and media or a document by URL.
CONTENT_ELSEWHERE = frozenset({"file_id", "fileUri", "file_uri"})
CONTENT_URLS = frozenset({"url", "image_url", "file_url", "fileUri"})
# What the content holds that is not content: the tools offered and their schemas, and the
# calls of client tools with their results (an argument named "url" is text, not a fetch).
NOT_CONTENT = frozenset({
    "tools", "tool_choice", "input_schema", "parameters", "response_format", "functionCall",
    "functionResponse", "functionDeclarations",
})  # fmt: skip
CALLS = ("tool_use", "tool_result", "_call", "_call_output")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Tools the model calls back to the client (by type, or its prefix before a dated suffix); any
# other kind runs at the provider (a web search or fetch, code execution, a remote MCP server),
# whose use is not bounded by the request's size.
CLIENT_TOOLS = ("function", "custom", "local_shell", "apply_patch", "computer", "bash",
                "text_editor", "memory")  # fmt: skip
GEMINI_TOOLS = frozenset({"functionDeclarations", "function_declarations"})
MAX_COUNT = 10**9  # a count larger than any model's is this many


class _TwiceError(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _TwiceError
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def asked(provider: str, path: str, body: bytes) -> Asked | str:
    """An inference request's model and output limit (times the answers it asks for), its
    body as it will be sent (written again from what was read: an upstream reads exactly what
    was checked; an OpenAI chat completion that streams is asked for its usage, which it
    leaves out otherwise), or why the route cannot read it."""
    try:
        request = json.loads(body, object_pairs_hook=_unique, parse_constant=_no_constant)
    except _TwiceError:
        return "the request's body names a field twice"
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "the request's body is not JSON"
    if not isinstance(request, dict):
        return "the request's body is not a JSON object"
    model: Any
    if provider == "google":
        model = path.rpartition("/models/")[2].partition(":")[0]
        config = _dict(request.get("generationConfig"))
        limits, copies = [config.get("maxOutputTokens")], config.get("candidateCount")
    else:
        names = ("max_tokens", "max_output_tokens", "max_completion_tokens")
        model, limits = request.get("model"), [request.get(n) for n in names]
        copies = request.get("n") if provider == "openai" else None
    if not isinstance(model, str) or not model:
        return "the request names no model"
    if path.endswith("/chat/completions") and request.get("stream") is True:
        request["stream_options"] = {**_dict(request.get("stream_options")), "include_usage": True}
    limit = max(map(_count, limits)) or DEFAULT_MAX_OUTPUT.get(provider, 128_000)
    sent = json.dumps(request, separators=(",", ":")).encode()  # (ASCII: any text survives)
    alone = _elsewhere(request) or _provider_tools(provider, request)
    return Asked(model, min(limit * max(_count(copies), 1), MAX_COUNT), sent, alone)


def _elsewhere(request: dict[str, Any]) -> bool:
    """Whether the request refers to content apart from it: by a field of its own, or in its
    messages' content, a file by its id or media by URL."""
    if any(request.get(key) for key in ELSEWHERE):
        return True
    stack: list[Any] = [v for k, v in request.items() if k not in NOT_CONTENT]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict) and not str(item.get("type", "")).endswith(CALLS):
            for key, part in item.items():
                if key in CONTENT_ELSEWHERE and part:
                    return True
                if key in CONTENT_URLS and isinstance(part, str) and _URL.match(part):
                    return True
                if key not in NOT_CONTENT:
                    stack.append(part)
    return False


def _provider_tools(provider: str, request: dict[str, Any]) -> bool:
    """Whether the request offers the model a tool the provider runs itself."""
    tools = request.get("tools")
    if not isinstance(tools, list):
        return False
    for tool in tools:
        if not isinstance(tool, dict):
            return True
        if provider == "google" and not set(tool) <= GEMINI_TOOLS:
            return True
        if provider != "google" and not str(tool.get("type", "custom")).startswith(CLIENT_TOOLS):
            return True
    return False


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return min(value, MAX_COUNT)
    return 0
