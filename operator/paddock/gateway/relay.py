"""A model's answer on its way back through the route: streamed as it comes, scrubbed of the
run's key and token (headers and body, as the run log is), its usage counted as it passes and
told within the meter's period; and, whatever ends it (its end, its client leaving, an error),
its upstream response closed, its usage settled and what it held of the budget given back,
once."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable

import anyio
import httpx2
from prometheus_client import Counter
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from paddock.gateway.meter import Meter
from paddock.gateway.prices import PriceTable
from paddock.gateway.usage import Usage, UsageCounter
from paddock.policy.budgets import Spent
from paddock.render.model_routes import Route
from paddock.runs.scrubbing import StreamScrubber

TOKENS = Counter(
    "paddock_model_tokens",
    "Model tokens the gateway's model route saw used, from the providers' own usage fields, by "
    "the run's namespace, harness and direction (input, output).",
    ["namespace", "harness", "direction"],
)
COST = Counter(
    "paddock_model_cost_usd",
    "What the model requests through the route cost, in US dollars, from the price table, by "
    "the run's namespace (models the table does not price are counted in tokens only).",
    ["namespace"],
)
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host"}
)  # fmt: skip
# Not passed back: the length changes where a value is masked, and the body is uncompressed.
REWRITTEN = frozenset({"content-length", "content-encoding"})


class Passage:
    """One answer's way back (``chunks``), settled by ``close``."""

    def __init__(
        self,
        route: Route,
        response: httpx2.Response,
        token: str,
        inference: bool,
        held: Spent,
        line: str,
    ) -> None:
        self.route, self.response, self.held, self.line = route, response, held, line
        self.inference = inference
        self.counter = UsageCounter(route.provider, response.headers.get("content-type", ""))
        self.scrubber = StreamScrubber([route.key, token])
        self.streamed = Spent()  # what of the answer is counted already, as it passed
        self.closed = False
        self.ended: list[Callable[[], None]] = []  # told once it is closed

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The answer's headers as they go back (each of a repeated one: cookies), scrubbed."""
        dropped = HOP_BY_HOP | REWRITTEN
        return [
            (k.lower().encode("latin-1"), self.scrubber.header(v).encode("latin-1"))
            for k, v in self.response.headers.multi_items()
            if k.lower() not in dropped
        ]

    async def chunks(
        self, table: PriceTable, meter: Meter, settled: asyncio.Condition
    ) -> AsyncIterator[bytes]:
        """The answer's bytes, masked; settled before its end reaches the client (the next
        request of the harness finds it counted)."""
        async for chunk in self.response.aiter_raw():
            self.counter.feed(chunk)
            grown = _spent(self.counter.so_far, table).at_least(self.streamed)  # (only grows)
            if grown != self.streamed:
                meter.streaming(self.route, grown - self.streamed)
                self.streamed = grown
            masked = self.scrubber.feed(chunk)
            if masked:
                yield masked
        tail = self.scrubber.end()
        if tail:
            yield tail
        await self.close(table, meter, settled)

    async def close(self, table: PriceTable, meter: Meter, settled: asyncio.Condition) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.response.aclose()
        finally:
            try:
                usage = self.counter.usage
                line = f"{self.line} -> {self.response.status_code}"
                cost = _counted(self.route, usage, table, line)
                status = self.response.status_code
                uncounted = status < 300 and self.inference and not self.counter.counted
                meter.used(self.route, usage, cost, uncounted, self.streamed)
            finally:
                meter.landed(self.route, self.held)
                for told in self.ended:
                    told()
                with anyio.CancelScope(shield=True):  # (a client that left as it ended)
                    async with settled:
                        settled.notify_all()


class Relayed(StreamingResponse):
    """The answer, streamed back; its passage closed however the streaming ends."""

    def __init__(
        self, passage: Passage, table: PriceTable, meter: Meter, settled: asyncio.Condition
    ) -> None:
        self.passage = passage
        self._chunks = passage.chunks(table, meter, settled)
        super().__init__(self._chunks, passage.response.status_code)
        self.raw_headers = passage.headers()
        self._table, self._meter, self._settled = table, meter, settled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._chunks.aclose()  # type: ignore[attr-defined]
            await self.passage.close(self._table, self._meter, self._settled)


def _spent(usage: Usage, prices: PriceTable) -> Spent:
    """The tokens of an answer so far, and their cost if its model is priced."""
    cost = prices.cost(usage) or 0.0
    return Spent(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost_usd=cost)


def _counted(route: Route, usage: Usage, prices: PriceTable, line: str) -> float | None:
    """A response that passed: its usage counted, and logged with the request; its cost."""
    namespace = route.run.partition("/")[0]
    harness = route.harness or "-"
    TOKENS.labels(namespace, harness, "input").inc(usage.input_tokens)
    TOKENS.labels(namespace, harness, "output").inc(usage.output_tokens)
    cost = prices.cost(usage)
    if cost is not None:
        COST.labels(namespace).inc(cost)
    priced = "unpriced" if cost is None else f"${cost:.6f}"
    say(f"run={route.run} {line} model={usage.model or '-'} input={usage.input_tokens} "
        f"output={usage.output_tokens} cost={priced}")  # fmt: skip
    return cost


def say(line: str) -> None:
    print(f"paddock gateway: model route: {line}", file=sys.stderr, flush=True)
