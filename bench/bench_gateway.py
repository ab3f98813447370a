"""Benchmark: what the egress gateway costs, as ratios to going direct in the same run.

Squid and Paddock's helper run as ``paddock gateway`` runs them (``gateway.run.start_squid``), on
loopback, in front of an HTTPS server of the benchmark's own. The gateway's directory is filled
here, not from watches: one sandbox, whose pod has this host's loopback address, under a policy
that allows the server's name. Every connection is judged, and every tunnel's SNI checked, as in
a cluster.

- Latency: ``--requests`` (200) requests one after the other, each on a new connection (TCP, TLS,
  GET), direct and through the gateway (CONNECT, then the same): the median of each, their
  ratio and the time the gateway adds.
- Throughput: ``--clients`` (8) threads open new connections for ``--seconds`` (3) each way:
  connections a second through the gateway as a ratio of direct.

Usage: ``make bench``, or ``python bench/bench_gateway.py``. Skipped, saying why, without Squid
and socat (``make node-packages``).
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from paddock.gateway.directory import Directory
from paddock.gateway.run import forget_shared_memory, found, peek_certificate, start_squid
from paddock.gateway.squid import SquidConfig

HOST = "bench.paddock.test"
RUN_AS = "proxy"  # Squid will not run as root


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


def _tls_server(directory: Path) -> ThreadingHTTPServer:
    pem = peek_certificate()  # any self-signed certificate does: the clients do not check it
    cert = x509.load_pem_x509_certificate(pem)
    key = serialization.load_pem_private_key(pem, password=None)
    (directory / "server.pem").write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "server.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _directory(port: int) -> Directory:
    """One sandbox, at this host's loopback address, allowed the server's name."""
    directory = Directory()
    owner = {"kind": "Sandbox", "name": "bench", "uid": "bench", "controller": True}
    directory.pod(
        "ADDED",
        {
            "metadata": {"namespace": "bench", "name": "bench", "ownerReferences": [owner],
                         "labels": {"paddock.dev/sandbox": "bench"}},
            "status": {"phase": "Running", "podIPs": [{"ip": "127.0.0.1"}]},
        },
    )  # fmt: skip
    policy = {"network": {"hosts": {"allow": [f"{HOST}:{port}"]}}}
    directory.sandbox(
        "ADDED",
        {
            "metadata": {"namespace": "bench", "name": "bench", "uid": "bench"},
            "spec": {"policy": policy},
            "status": {"policy": "inline"},
        },
    )
    return directory


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fetch(port: int, proxy: int | None) -> None:
    context = ssl._create_unverified_context()  # noqa: S323  (the bench's own certificate)
    if proxy is None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", proxy, context=context, timeout=10)
        conn.set_tunnel(HOST, port)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        if response.read() != b"hello\n":
            raise RuntimeError(f"unexpected answer {response.status}")
    finally:
        conn.close()


def median_ms(fetch: Callable[[], None], requests: int) -> float:
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        fetch()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def per_second(fetch: Callable[[], None], clients: int, seconds: float) -> float:
    done = [0] * clients
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        while time.monotonic() < deadline:
            fetch()
            done[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    squid, relay = found("squid"), found("socat")
    if squid is None or relay is None:
        print("egress gateway: skipped (no squid or socat: make node-packages)")
        return 0
    with tempfile.TemporaryDirectory(prefix="paddock-bench-gateway-") as scratch:
        root = Path(scratch)
        root.chmod(0o755)
        server = _tls_server(root)
        port = server.server_address[1]
        (root / "hosts").write_text(f"127.0.0.1 {HOST}\n")
        proxy = _free_port()
        config = SquidConfig(
            listen=f"127.0.0.1:{proxy}", runtime=root / "gateway", relay=relay,
            vouched=("127.0.0.1/32",), hosts_file=root / "hosts",
            user=RUN_AS if os.geteuid() == 0 else None,
        )  # fmt: skip
        ready = threading.Event()
        ready.set()
        log = root / "squid.log"  # Squid opens it again by name, as its own user
        log.touch()
        if config.user:
            shutil.chown(log, config.user, config.user)
        service = f"paddockbench{os.getpid()}"
        with log.open("ab") as output:
            child = start_squid(squid, config, service, _directory(port), ready, output)
        try:
            _wait_listening(proxy)
            _report(port, proxy, args)
        finally:
            child.terminate()
            child.wait(30)
            forget_shared_memory(service)
            server.shutdown()
    return 0


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit("the gateway did not listen within 30 s")


def _report(port: int, proxy: int, args: argparse.Namespace) -> None:
    def direct() -> None:
        _fetch(port, None)

    def through() -> None:
        _fetch(port, proxy)

    through()  # the helpers start with the first question
    direct_ms, through_ms = median_ms(direct, args.requests), median_ms(through, args.requests)
    print(f"Egress gateway, one HTTPS request on a new connection, p50 of {args.requests}")
    print(f"  direct (baseline)           : {direct_ms:8.2f} ms")
    print(f"  through the gateway         : {through_ms:8.2f} ms")
    print(f"  ratio gateway / direct      : {through_ms / direct_ms:8.2f}")
    print(f"  added by the gateway        : {through_ms - direct_ms:8.2f} ms")
    direct_rate = per_second(direct, args.clients, args.seconds)
    through_rate = per_second(through, args.clients, args.seconds)
    print(f"Egress gateway, new connections a second, {args.clients} clients")
    print(f"  direct (baseline)           : {direct_rate:8.0f} /s")
    print(f"  through the gateway         : {through_rate:8.0f} /s")
    print(f"  ratio gateway / direct      : {through_rate / direct_rate:8.2f}")


if __name__ == "__main__":
    sys.exit(main())
