"""Squid's external ACL helpers, answered by the gateway's own process: Squid asks, for each
connection, whether the sandbox it comes from may reach the host (``access``), and for each
tunnel, whether its TLS server name is the host the CONNECT named (``sni``). One line per
question, answered on one line (Squid's concurrency protocol: each line starts with a channel
number the answer repeats). Squid's helper is socat, relaying to this process's unix socket: the
decisions are made where the watches are, whatever user Squid runs as.

The access answers follow the cluster's sandbox pods, Sandboxes and SandboxPolicies by watches
(``follow``), and are "no" until the first listings are in: a starting gateway lets nothing
through. Their ``log=`` reaches Squid's access log: each decision is logged with the sandbox
it came from.
"""

from __future__ import annotations

import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import prometheus_client
from prometheus_client import Counter

from paddock.gateway.directory import Ask, Decided, Directory, sni_matches
from paddock.kube import follow as following
from paddock.kube import watches
from paddock.render.cluster_addresses import API_SERVICE_LABEL, ClusterAddresses
from paddock.render.model_routes import RUN_UID_LABEL
from paddock.vocab import names

Obj = dict[str, Any]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
Decide = Callable[[list[str]], str]
WATCH_SECONDS = 300
RETRY_SECONDS = 2.0
DECISIONS = Counter(
    "paddock_gateway_connections",
    "Connections and requests the egress gateway decided, by decision and by what decided: a "
    "host rule, default (a name no rule matched), any (a policy that names no hosts) or "
    "refused (no sandbox's address, not a name, an unknown or invalid policy).",
    ["decision", "rule"],
)


def _word(value: str) -> str:
    """A value Squid's helper protocol reads as one token, and its access log as one line."""
    printable = "".join(c if c.isprintable() else "?" for c in value)
    return '"' + printable.replace("\\", "/").replace('"', "'") + '"'


def _values(words: list[str], count: int) -> list[str]:
    """The first ``count`` values of a question (Squid %-encodes them; "-" for none)."""
    return [unquote(word) for word in [*words, *["-"] * count][:count]]


def answer_access(
    directory: Directory,
    ready: threading.Event,
    words: list[str],
    ask: Callable[[Ask], object] = lambda _: None,
) -> str:
    """Whether the sandbox at the address may reach the host and port; a host its policy asks
    about, not yet approved, is refused and asked about (``ask``) on the run in the sandbox."""
    address, host, port = _values(words, 3)
    if not ready.is_set():
        decided = Decided(False, "-", "the gateway is starting")
    elif not port.isdigit():
        decided = Decided(False, "-", "no port")
    else:
        decided = directory.decide(address, host, int(port))
    verdict = "allow" if decided.allowed else "deny"
    DECISIONS.labels(verdict, decided.counted_as).inc()
    if decided.ask is not None:
        ask(decided.ask)
    log = _word(f"sandbox={decided.sandbox} decision={verdict} host={host}:{port} {decided.reason}")
    message = _word(f"Paddock's egress gateway: {host}:{port} {decided.reason}")
    return f"{'OK' if decided.allowed else 'ERR'} log={log} message={message}"


def answer_sni(words: list[str]) -> str:
    host, sni = _values(words, 2)
    if sni_matches(host, sni):
        return "OK"
    named = "no server name" if sni in ("", "-") else f"the server name {sni}"
    return f"ERR log={_word(f'decision=deny host={host} TLS asks for {named}')}"


def serve(lines: Iterable[bytes], write: Callable[[bytes], object], decide: Decide) -> None:
    """Answer each ``CHANNEL ARGS...`` line with ``CHANNEL ANSWER``, until the input ends."""
    for line in lines:
        words = line.decode("utf-8", errors="replace").split()
        if words:
            write(f"{words[0]} {decide(words[1:])}\n".encode())


def listen(path: Path, decide: Decide) -> socketserver.BaseServer:
    """Serve ``decide`` on a unix socket at ``path``, one thread per connection (Squid keeps
    one open per helper it starts)."""

    class Relayed(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            serve(self.rfile, self.wfile.write, decide)

    path.unlink(missing_ok=True)
    server = socketserver.ThreadingUnixStreamServer(str(path), Relayed)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name=path.name).start()
    return server


def follow(directory: Directory, ready: threading.Event) -> None:
    """Fill the directory from watches of every namespace's sandbox pods, Sandboxes,
    SandboxPolicies and AgentRuns; ``ready`` once all four are listed."""
    kinds = (("Pod", names.SANDBOX_LABEL), ("Sandbox", ""), ("SandboxPolicy", ""), ("AgentRun", ""))
    listed = threading.Barrier(len(kinds), action=ready.set)
    for kind, selector in kinds:
        _start(kind, selector, directory.relisted, directory.changed, listed)


def follow_routes(
    namespace: str,
    relisted: Callable[[str, list[Obj]], object],
    changed: Callable[[str, str, Obj], object],
    listed: threading.Barrier,
    label: str = RUN_UID_LABEL,
) -> None:
    """Keep the routes from a watch of their Secrets (those with ``label``: the model routes',
    unless told) in the gateway's ``namespace``."""
    _start(f"Secret:{namespace}", label, relisted, changed, listed)


def follow_cluster(
    addresses: ClusterAddresses, known: threading.Event, moved: Callable[[], None]
) -> None:
    """Keep ``addresses`` from watches of the Nodes and the API server's EndpointSlice;
    ``known`` once both are listed; ``moved`` after each later change of the set."""
    listed = threading.Barrier(2, action=known.set)

    def relisted(kind: str, items: list[Obj]) -> None:
        if addresses.relisted(kind, items) and known.is_set():
            moved()

    def changed(kind: str, event: str, obj: Obj) -> None:
        if addresses.seen(event, {**obj, "kind": kind}) and known.is_set():
            moved()

    for kind, selector in (("Node", ""), ("EndpointSlice", f"{API_SERVICE_LABEL}=kubernetes")):
        _start(kind, selector, relisted, changed, listed)


def _start(
    kind: str,
    selector: str,
    relisted: Callable[[str, list[Obj]], object],
    changed: Callable[[str, str, Obj], object],
    listed: threading.Barrier,
) -> None:
    args = (kind, selector, relisted, changed, listed)
    threading.Thread(target=_follow_one, args=args, daemon=True, name=kind).start()


def _follow_one(
    kind: str,
    selector: str,
    relisted: Callable[[str, list[Obj]], object],
    changed: Callable[[str, str, Obj], object],
    listed: threading.Barrier,
) -> None:
    """List, then watch, for good (``kube.follow``: listed again when the watch's version
    expires, or after a pause while the API server is away); anything else that ends it is
    said, and it starts over: a watch thread that ended would freeze what the gateway knows."""
    first = True

    def waited(exc: BaseException, pause: float) -> None:
        print(f"paddock gateway: {kind} watch: {exc}; listing again in {pause:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip

    while True:
        try:
            for seen in following.follow(
                lambda: watches.list_all_at(kind, selector),
                lambda version: watches.watch_all(kind, selector, version, WATCH_SECONDS),
                waited=waited,
            ):
                if isinstance(seen, following.Changed):
                    changed(kind, seen.type, seen.object)
                    continue
                relisted(kind, seen.objects)
                if first:
                    listed.wait()
                    first = False
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}"
            print(f"paddock gateway: {kind} watch failed ({said}); listing again",
                  file=sys.stderr, flush=True)  # fmt: skip
            time.sleep(RETRY_SECONDS)
