"""What a model request used, read from the provider's own response as it streams through the
gateway's model route: Anthropic Messages (``usage`` in ``message_start`` and each
``message_delta``), OpenAI Responses (``usage`` of ``response.completed``) and Gemini
(``usageMetadata``, in each chunk of a stream), streamed as server-sent events or answered as
one JSON body. Pure: the route feeds each chunk of the response as it passes.

Counts are the provider's: input tokens include those read from and written to a prompt cache
(each provider bills them, at its own rates); output tokens include reasoning ("thinking")
tokens. A response the counter cannot read counts the request and no tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_BODY = 8 * 1024 * 1024  # a JSON answer larger than this is not read for its usage
MAX_LINE = 1024 * 1024  # nor an event line longer than this


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _anthropic(usage: dict[str, Any]) -> int:
    return sum(
        _int(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


class UsageCounter:
    """Feed it a response's bytes as they pass (``feed``), then read ``usage``."""

    def __init__(self, provider: str, content_type: str) -> None:
        self.provider = provider
        self.streamed = "text/event-stream" in content_type.lower()
        self._input = 0
        self._output = 0
        self._model = ""
        self._pending = b""
        self._too_long = False
        self.counted = False

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        if not self.streamed:
            if len(self._pending) > MAX_BODY:
                self._pending, self._too_long = b"", True
            return
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._line(line)
        if len(self._pending) > MAX_LINE:
            self._pending = b""

    @property
    def usage(self) -> Usage:
        """The answer's usage, once it has passed whole (a JSON answer is read only then)."""
        if not self.streamed and self._pending and not self._too_long:
            self._event(self._pending)
            self._pending = b""
        return self.so_far

    @property
    def so_far(self) -> Usage:
        """What the events read so far say: a streamed answer's figures grow as it passes."""
        return Usage(self._input, self._output, self._model)

    def _line(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if line.startswith(b"data:"):
            self._event(line[5:].strip())

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return
        if isinstance(event, dict):
            {"anthropic": self._anthropic, "openai": self._openai, "google": self._google}.get(
                self.provider, lambda _: None
            )(event)

    def _anthropic(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            usage = message.get("usage") or {}
            self._model = str(message.get("model") or self._model)
            self._input = _anthropic(usage)
            self._output = _int(usage.get("output_tokens"))
        elif kind == "message_delta" and isinstance(event.get("usage"), dict):
            usage = event["usage"]  # cumulative: the last one holds the whole message's
            self._output = _int(usage.get("output_tokens")) or self._output
            self._input = _anthropic(usage) or self._input
            self.counted = True
        elif kind == "message" and isinstance(event.get("usage"), dict):  # not streamed
            self._model = str(event.get("model") or "")
            self._input = _anthropic(event["usage"])
            self._output = _int(event["usage"].get("output_tokens"))
            self.counted = True

    def _openai(self, event: dict[str, Any]) -> None:
        response = event.get("response") if event.get("type") == "response.completed" else event
        if not isinstance(response, dict) or not isinstance(response.get("usage"), dict):
            return
        usage = response["usage"]
        self._model = str(response.get("model") or self._model)
        self._input = _int(usage.get("input_tokens")) or _int(usage.get("prompt_tokens"))
        self._output = _int(usage.get("output_tokens")) or _int(usage.get("completion_tokens"))
        self.counted = True

    def _google(self, event: dict[str, Any]) -> None:
        usage = event.get("usageMetadata")
        if not isinstance(usage, dict):
            return
        self._model = str(event.get("modelVersion") or self._model)
        self._input = _int(usage.get("promptTokenCount"))  # cumulative in each chunk
        self._output = _int(usage.get("candidatesTokenCount")) + _int(
            usage.get("thoughtsTokenCount")
        )
        self.counted = True
