"""Squid's external ACL helper: Squid asks, for each connection, whether the sandbox it comes
from may reach the host (mode ``access``), and for each tunnel, whether its TLS server name is
the host the CONNECT named (mode ``sni``). One line per question, answered on one line, many
at once (Squid's concurrency protocol: each line starts with a channel number the answer
repeats).

The access helper follows the cluster's sandbox pods, Sandboxes and SandboxPolicies by watches
(``follow``), and answers "no" until its first listings are in: a starting gateway lets
nothing through. Its ``log=`` reaches Squid's access log: each decision is logged with the
sandbox it came from.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO
from urllib.parse import unquote

from prometheus_client import Counter, start_http_server

from paddock.gateway.directory import Decided, Directory, sni_matches
from paddock.kube import client as kube
from paddock.kube import watches
from paddock.kube.errors import KubeError
from paddock.render import names

WATCH_SECONDS = 300
RETRY_SECONDS = 2.0
DECISIONS = Counter(
    "paddock_gateway_connections",
    "Connections and requests the egress gateway decided, by decision and by the host rule "
    "that decided (default: none matched; refused: no sandbox, or not a name).",
    ["decision", "rule"],
)


def _word(value: str) -> str:
    """A value Squid's helper protocol reads as one token."""
    return '"' + value.replace("\\", "/").replace('"', "'") + '"'


def _values(words: list[str], count: int) -> list[str]:
    """The first ``count`` values of a question (Squid %-encodes them; "-" for none)."""
    return [unquote(word) for word in [*words, *["-"] * count][:count]]


def answer_access(directory: Directory, ready: threading.Event, words: list[str]) -> str:
    address, host, port = _values(words, 3)
    if not ready.is_set():
        decided = Decided(False, "-", "the gateway is starting")
    elif not port.isdigit():
        decided = Decided(False, "-", "no port")
    else:
        decided = directory.decide(address, host, int(port))
    verdict = "allow" if decided.allowed else "deny"
    rule = decided.rule or ("default" if decided.sandbox != "-" else "refused")
    DECISIONS.labels(verdict, rule).inc()
    log = _word(f"sandbox={decided.sandbox} decision={verdict} host={host}:{port} {decided.reason}")
    message = _word(f"Paddock's egress gateway: {host}:{port} {decided.reason}")
    return f"{'OK' if decided.allowed else 'ERR'} log={log} message={message}"


def answer_sni(words: list[str]) -> str:
    host, sni = _values(words, 2)
    if sni_matches(host, sni):
        return "OK"
    named = "no server name" if sni in ("", "-") else f"the server name {sni}"
    return f"ERR log={_word(f'decision=deny host={host} TLS asks for {named}')}"


def serve(lines: TextIO, out: TextIO, decide: Callable[[list[str]], str]) -> None:
    """Answer each ``CHANNEL ARGS...`` line with ``CHANNEL ANSWER``, until stdin closes."""
    for line in lines:
        words = line.split()
        if not words:
            continue
        out.write(f"{words[0]} {decide(words[1:])}\n")
        out.flush()


def follow(directory: Directory, ready: threading.Event) -> None:
    """Fill the directory from watches of every namespace's sandbox pods, Sandboxes and
    SandboxPolicies, each listed again when its watch expires; ``ready`` once all three are
    listed."""
    listed = threading.Barrier(3, action=ready.set)
    for kind, selector, apply in (
        ("Pod", names.SANDBOX_LABEL, directory.pod),
        ("Sandbox", "", directory.sandbox),
        ("SandboxPolicy", "", directory.policy),
    ):
        thread = threading.Thread(
            target=_follow_one, args=(kind, selector, apply, listed), daemon=True, name=kind
        )
        thread.start()


def _follow_one(
    kind: str,
    selector: str,
    apply: Callable[[str, dict[str, Any]], None],
    listed: threading.Barrier,
) -> None:
    first = True
    while True:
        try:
            items, version = watches.list_all_at(kind, selector)
            for item in items:
                apply("ADDED", item)
            if first:
                listed.wait()
                first = False
            while True:
                for event, obj in watches.watch_all(kind, selector, version, WATCH_SECONDS):
                    if event in ("ADDED", "MODIFIED", "DELETED"):
                        apply(event, obj)
                        version = str(obj["metadata"]["resourceVersion"])
        except (KubeError, watches.WatchExpiredError) as exc:
            print(f"paddock gateway: {kind} watch: {exc}", file=sys.stderr, flush=True)
            time.sleep(RETRY_SECONDS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="paddock-gateway-helper")
    parser.add_argument("mode", choices=["access", "sni"])
    parser.add_argument("--metrics-port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.mode == "sni":
        serve(sys.stdin, sys.stdout, answer_sni)
        return
    kube.load_config()
    if args.metrics_port:
        start_http_server(args.metrics_port)
    directory, ready = Directory(), threading.Event()
    follow(directory, ready)
    serve(sys.stdin, sys.stdout, lambda words: answer_access(directory, ready, words))


if __name__ == "__main__":
    main()
