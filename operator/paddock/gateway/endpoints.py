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
    answered with, and its body as it will be sent."""

    model: str
    max_output: int
    body: bytes


def asked(provider: str, path: str, body: bytes) -> Asked | str:
    """An inference request's model and output limit, its body as sent (an OpenAI chat
    completion that streams is asked for its usage, which it leaves out otherwise), or why
    the route cannot read it."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "the request's body is not JSON"
    if not isinstance(request, dict):
        return "the request's body is not a JSON object"
    model: Any
    if provider == "google":
        model = path.rpartition("/models/")[2].partition(":")[0]
        config = request.get("generationConfig")
        limit = config.get("maxOutputTokens") if isinstance(config, dict) else None
    else:
        model = request.get("model")
        names = ("max_tokens",) if provider == "anthropic" else (
            "max_output_tokens", "max_completion_tokens", "max_tokens")  # fmt: skip
        limit = next((request[n] for n in names if request.get(n) is not None), None)
    if not isinstance(model, str) or not model:
        return "the request names no model"
    if path.endswith("/chat/completions") and request.get("stream") is True:
        request["stream_options"] = {**_dict(request.get("stream_options")), "include_usage": True}
        body = json.dumps(request, separators=(",", ":")).encode()
    maximum = _count(limit) or DEFAULT_MAX_OUTPUT.get(provider, max(DEFAULT_MAX_OUTPUT.values()))
    return Asked(model, maximum, body)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
