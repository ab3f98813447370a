"""Benchmark: what the egress gateway's model route costs, as ratios to reaching the model API
directly in the same run.

The route runs as ``paddock gateway --model-listen`` serves it (``gateway.model``: uvicorn, in a
thread of its own), on loopback, in front of a model API of the benchmark's own that answers each
request with a streamed Anthropic Messages response (server-sent events, as the CLIs ask for).
Its routes are filled here, not from a watch: one run, whose sandbox is this host's loopback
address. Every request is looked up by its token, checked against the sandbox and the run's
budget, stripped of it, given the key and forwarded, and its usage counted, as in a cluster.

- Latency: ``--requests`` (300) streamed requests one after the other (a connection each, as
  a CLI's first request opens), direct and through the route: the median of each, their ratio
  and the time the route adds.
- Throughput: ``--clients`` (8) threads send requests for ``--seconds`` (3) each way: requests
  a second through the route as a ratio of direct.

Usage: ``make bench``, or ``python bench/bench_model_route.py``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench_gateway import median_ms, per_second  # the same timing as the proxy's bench

from paddock.api.budget import Budget
from paddock.gateway import model
from paddock.gateway.meter import Meter
from paddock.gateway.routes import Routes
from paddock.render.model_routes import Route, route_secret, token_digest
from paddock.times import utcnow

TOKEN, KEY = "paddock-bench-token", "sk-bench-key"
BODY = json.dumps({"model": "m", "max_tokens": 64, "stream": True,
                   "messages": [{"role": "user", "content": "hello"}]}).encode()  # fmt: skip
EVENTS = [
    ("message_start", {"type": "message_start", "message": {"id": "m1", "usage": {}}}),
    *[("content_block_delta", {"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": f"word{i} "}})
      for i in range(20)],
    ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 20}}),
    ("message_stop", {"type": "message_stop"}),
]  # fmt: skip


class _Model(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("x-api-key") != KEY:
            self.send_error(401)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in EVENTS:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.close_connection = True

    def log_message(self, *_: Any) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _request(port: int, key: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"x-api-key": key, "content-type": "application/json"}
    connection.request("POST", "/v1/messages", BODY, headers)
    response = connection.getresponse()
    streamed = response.read()
    connection.close()
    if response.status != 200 or b"message_stop" not in streamed:
        raise RuntimeError(f"the model request failed: {response.status}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    # The route logs a line per request to stderr, as in a cluster: written, not shown.
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115, PTH123
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    api = f"http://127.0.0.1:{upstream.server_address[1]}"
    routes = Routes()
    # A budget no request reaches: each is checked against it and counted, as in a cluster;
    # the totals are told to a publish that keeps nothing (no cluster here).
    route = Route(token_digest(TOKEN), KEY, api, "anthropic", "bench/run", "bench/box",
                  utcnow() + timedelta(hours=1), budget=Budget(tokens=10**12))  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid", route)])
    port = _free_port()
    meter = Meter(lambda *_: None, replica="bench")
    app = model.model_app(routes, {"127.0.0.1": "bench/box"}.get, lambda: True, meter=meter)
    server = model.serve(app, "127.0.0.1", port)
    while not server.started:
        time.sleep(0.01)
    direct = lambda: _request(upstream.server_address[1], KEY)  # noqa: E731
    routed = lambda: _request(port, TOKEN)  # noqa: E731
    direct(), routed()  # warm
    direct_ms, routed_ms = median_ms(direct, args.requests), median_ms(routed, args.requests)
    print(f"Model route, one streamed model request on a new connection, p50 of {args.requests}")
    print(f"  direct (baseline)           : {direct_ms:8.2f} ms")
    print(f"  through the model route     : {routed_ms:8.2f} ms")
    print(f"  ratio route / direct        : {routed_ms / direct_ms:8.2f}")
    print(f"  added by the route          : {routed_ms - direct_ms:8.2f} ms")
    direct_rate = per_second(direct, args.clients, args.seconds)
    routed_rate = per_second(routed, args.clients, args.seconds)
    print(f"Model route, streamed model requests a second, {args.clients} clients")
    print(f"  direct (baseline)           : {direct_rate:8.0f} /s")
    print(f"  through the model route     : {routed_rate:8.0f} /s")
    print(f"  ratio route / direct        : {routed_rate / direct_rate:8.2f}")
    server.should_exit = True
    upstream.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
