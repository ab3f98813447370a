"""``paddock gateway``: write the egress gateway's Squid configuration and its throwaway
certificate, then become Squid (in the foreground: signals and the exit code are Squid's)."""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from paddock.gateway.squid import ALWAYS_INTERNAL, SquidConfig, render_squid_conf

HELPER_MODULE = "paddock.gateway.helper"


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
        "through. Runs Squid in the foreground; Paddock's helper follows sandbox pods, "
        "Sandboxes and SandboxPolicies with this process's Kubernetes credentials.",
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
        "private, loopback and link-local ranges: the cluster's own",
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
    gateway.set_defaults(func=run_gateway)


def run_gateway(args: argparse.Namespace) -> int:
    squid = shutil.which("squid") or shutil.which("squid", path="/usr/sbin:/usr/local/sbin")
    if squid is None:
        print("paddock gateway: squid is not installed (Debian: squid-openssl)", file=sys.stderr)
        return 1
    runtime = Path(args.runtime_dir)
    runtime.mkdir(parents=True, exist_ok=True)
    helper: tuple[str, ...] = (sys.executable, "-m", HELPER_MODULE)
    if args.metrics_port:
        helper += ("--metrics-port", str(args.metrics_port))
    config = SquidConfig(
        listen=args.listen,
        runtime=runtime,
        helper=helper,
        internal=(*ALWAYS_INTERNAL, *args.internal),
        vouched=tuple(args.vouch),
        hosts_file=Path(args.hosts_file) if args.hosts_file else None,
        nameservers=tuple(args.nameserver),
    )
    config.certificate.write_bytes(peek_certificate())
    config.certificate.chmod(0o600)
    conf = runtime / "squid.conf"
    conf.write_text(render_squid_conf(config))
    sys.stdout.flush()
    os.execv(squid, [squid, "-N", "-f", str(conf)])  # noqa: S606  (its signals, its exit code)
    return 0  # not reached
