"""``paddock gateway``: the egress gateway. It writes Squid's configuration and throwaway
certificate, answers Squid's helper questions on unix sockets (from its watches of sandbox
pods, Sandboxes and SandboxPolicies), and runs Squid as its child: a stop signal is passed on,
and the gateway exits when Squid does, with its code."""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import start_http_server

from paddock.gateway import model
from paddock.gateway.asks import Asker
from paddock.gateway.credentials import (
    CredentialForwarding,
    CredentialRoutes,
    Reachable,
    Resolve,
    reachable_from,
    resolver,
)
from paddock.gateway.directory import Directory
from paddock.gateway.helper import (
    answer_access,
    answer_sni,
    follow,
    follow_cluster,
    follow_routes,
    listen,
)
from paddock.gateway.meter import Meter
from paddock.gateway.prices import PriceTable, Unreadable, read_prices
from paddock.gateway.routes import Routes
from paddock.gateway.squid import ALWAYS_INTERNAL, SquidConfig, render_squid_conf
from paddock.kube import client as kube
from paddock.render.cluster_addresses import ClusterAddresses
from paddock.render.credential_routes import ROUTES_OF_LABEL
from paddock.render.model_routes import RUN_UID_LABEL
from paddock.render.network_policy import ClusterNetwork

SHARED_MEMORY = Path("/dev/shm")  # noqa: S108  (where Linux keeps POSIX shared memory)


def peek_certificate() -> bytes:
    """A self-signed certificate and its key, PEM: Squid must hold one to peek at a TLS
    ClientHello. It signs nothing and no client trusts it (the gateway never decrypts)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "paddock egress gateway")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM) + pem_key


def add_gateway(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gateway = commands.add_parser(
        "gateway",
        help="run the egress gateway (Squid, with Paddock deciding per sandbox)",
        description="The egress gateway sandboxes with network.hosts reach the internet "
        "through. Runs Squid as its child and answers Squid's questions itself, following "
        "sandbox pods, Sandboxes and SandboxPolicies with this process's Kubernetes "
        "credentials.",
        epilog="example: paddock gateway --listen 0.0.0.0:3128 --runtime-dir /run/gateway",
    )
    gateway.add_argument("--listen", default="0.0.0.0:3128", help="HOST:PORT (%(default)s)")
    gateway.add_argument(
        "--runtime-dir", required=True, help="writable directory for Squid's files"
    )
    gateway.add_argument(
        "--internal",
        action="append",
        default=[],
        metavar="CIDR",
        help="a range never reached, whatever a name resolves to (repeatable), on top of the "
        "private, loopback and link-local ranges and the cluster's own addresses (its nodes' "
        "and the API server's, watched)",
    )
    gateway.add_argument(
        "--vouch",
        action="append",
        default=[],
        metavar="CIDR",
        help="an internal range a name may resolve to after all (repeatable)",
    )
    gateway.add_argument("--hosts-file", help="names resolved without DNS (/etc/hosts format)")
    gateway.add_argument(
        "--nameserver", action="append", default=[], help="DNS server (default: resolv.conf)"
    )
    gateway.add_argument(
        "--metrics-port", type=int, default=0, help="serve Prometheus metrics on this port"
    )
    gateway.add_argument(
        "--service",
        default="squid",
        help="Squid's service name, which names its shared memory (%(default)s; one per host)",
    )
    gateway.add_argument(
        "--run-as", help="started as root: the user Squid runs as (Squid refuses root)"
    )
    _model_arguments(gateway)
    gateway.set_defaults(func=run_gateway)


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model route's: where it listens, its price table, and where its routes are."""
    parser.add_argument(
        "--model-listen",
        metavar="HOST:PORT",
        help="serve the model route here: runs' model keys, from their Secrets in --namespace",
    )
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="the model route's price table (YAML: models: {NAME: {inputPerMTok, "
        "outputPerMTok}}); without one, tokens are counted and cost is not",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="the gateway's namespace, where the operator writes the runs' model routes "
        "(default: $POD_NAMESPACE)",
    )


def run_gateway(args: argparse.Namespace) -> int:
    squid, relay = found("squid"), found("socat")
    if squid is None or relay is None:
        print(
            "paddock gateway: needs squid and socat (Debian: squid-openssl socat)", file=sys.stderr
        )
        return 1
    config = SquidConfig(
        listen=args.listen,
        runtime=Path(args.runtime_dir),
        relay=relay,
        internal=(*ALWAYS_INTERNAL, *args.internal),
        vouched=tuple(args.vouch),
        hosts_file=Path(args.hosts_file) if args.hosts_file else None,
        nameservers=tuple(args.nameserver),
        user=args.run_as,
    )
    kube.load_config()
    directory, ready = Directory(), threading.Event()
    follow(directory, ready)
    if args.model_listen and not args.namespace:
        print("paddock gateway: --model-listen needs --namespace", file=sys.stderr)
        return 1
    if args.metrics_port:
        start_http_server(args.metrics_port)
    addresses, known = ClusterAddresses(), threading.Event()
    squid_process: list[subprocess.Popen[bytes]] = []

    def internal() -> SquidConfig:
        """The configured ranges and the cluster's addresses outside them, as the operator
        leaves them out of a sandbox's NetworkPolicy."""
        cluster = ClusterNetwork(internal=config.internal, addresses=addresses.all())
        return replace(config, internal=(*cluster.excluded(4), *cluster.excluded(6)))

    def moved() -> None:  # the cluster's addresses changed: Squid reads its configuration again
        (config.runtime / "squid.conf").write_text(render_squid_conf(internal()))
        for child in squid_process:
            child.send_signal(signal.SIGHUP)

    follow_cluster(addresses, known, moved)
    if args.model_listen:
        # The credential routes reach no address Squid would refuse: internal() as it is now.
        reachable = reachable_from(lambda: internal().internal, config.vouched)
        credentials = Credentials(reachable, lambda: known.is_set(), resolver(config.hosts_file))
        serve_models(args.model_listen, args.namespace, directory, ready, _prices(args.prices),
                     credentials)  # fmt: skip
    known.wait()  # Squid starts knowing the cluster's own addresses, never without them
    child = start_squid(squid, internal(), args.service, directory, ready)
    squid_process.append(child)
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda number, _: child.send_signal(number))
    code = child.wait()
    forget_shared_memory(args.service)
    return code


def _prices(path: str | None) -> PriceTable | None:
    """The price table, or None (said on stderr when it cannot be read: tokens only)."""
    if path is None:
        return None
    table = read_prices(Path(path))
    if isinstance(table, Unreadable):
        print(f"paddock gateway: {table.reason}; cost is not counted", file=sys.stderr)
        return None
    return table


@dataclass(frozen=True)
class Credentials:
    """What the credential routes need besides the directory: which addresses they may reach,
    and whether the cluster's own addresses are known yet (nothing passes until they are)."""

    reachable: Reachable
    known: Callable[[], bool]
    resolve: Resolve


def serve_models(
    listen: str,
    namespace: str,
    directory: Directory,
    ready: threading.Event,
    prices: PriceTable | None = None,
    credentials: Credentials | None = None,
) -> None:
    """Follow the model routes and the credential routes of ``namespace`` and serve them at
    ``listen`` (without ``credentials``, the model routes only)."""
    routes, meter = Routes(), Meter(known=directory.usage_of)
    listed = threading.Event()
    followed = threading.Barrier(2 if credentials else 1, action=listed.set)

    def changed(kind: str, event: str, obj: dict[str, Any]) -> None:
        before = routes.runs()
        routes.changed(kind, event, obj)
        for gone in before - routes.runs():
            model.ended(gone)
        if event == "DELETED":
            meter.forget(str(obj["metadata"].get("labels", {}).get(RUN_UID_LABEL, "")))

    follow_routes(namespace, routes.relisted, changed, followed)
    forwarding = None
    if credentials is not None:
        store = CredentialRoutes()
        follow_routes(namespace, store.relisted, store.changed, followed, ROUTES_OF_LABEL)
        forwarding = CredentialForwarding(
            store, directory.sandbox_at, directory.decide, credentials.reachable,
            lambda: ready.is_set() and listed.is_set() and credentials.known(),
            credentials.resolve,
        )  # fmt: skip
    app = model.model_app(
        routes, directory.sandbox_at, lambda: ready.is_set() and listed.is_set(), prices, meter,
        forwarding,
    )  # fmt: skip
    host, _, port = listen.rpartition(":")
    model.serve(app, host, int(port))


def forget_shared_memory(service: str) -> None:
    """Remove what a Squid of this service name left in /dev/shm (one that died leaves its
    segments, and the next one of the name would not start)."""
    for left in SHARED_MEMORY.glob(f"{service}-*"):
        left.unlink(missing_ok=True)


def start_squid(
    squid: str,
    config: SquidConfig,
    service: str,
    directory: Directory,
    ready: threading.Event,
    output: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """Write Squid's files, answer its helpers from ``directory`` (no until ``ready``), and
    start it, its logs to ``output`` (default: this process's stdout and stderr; Squid opens
    them again by name, as its own user)."""
    config.runtime.mkdir(parents=True, exist_ok=True)
    config.certificate.write_bytes(peek_certificate())
    config.certificate.chmod(0o600)
    conf = config.runtime / "squid.conf"
    conf.write_text(render_squid_conf(config))
    asker = Asker()
    listen(config.socket("access"), lambda words: answer_access(directory, ready, words, asker))
    listen(config.socket("sni"), answer_sni)
    if config.user:  # Squid, started as root, runs as this user: what it opens must be its
        for path in (config.runtime, conf, config.certificate, *config.sockets()):
            shutil.chown(path, config.user, config.user)
    argv = [squid, "-N", "-n", service, "-f", str(conf)]
    return subprocess.Popen(argv, stdout=output, stderr=output)


def found(program: str) -> str | None:
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/local/sbin")
