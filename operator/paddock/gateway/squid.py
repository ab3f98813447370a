"""The egress gateway's Squid configuration. Pure: the gateway writes it, then runs Squid.

Squid (Debian's squid-openssl) carries every connection and resolves every name itself: a
CONNECT or a plain HTTP request is refused when any address its host resolves to lies in an
internal range (unless the administrator vouches for it), then Paddock's helper decides by the
sandbox the connection comes from and its policy's ``network.hosts`` (the helper is socat,
relaying to the gateway's own process). A tunnel is let through
only once Squid has peeked at its TLS ClientHello and the helper has found its server name
(SNI) to be the host the CONNECT asked for; anything else in a tunnel (no TLS, no SNI, another
name) is cut. Squid never decrypts: its certificate is a throwaway it must hold to peek.

Squid shows nothing of itself: its own URLs (the cache manager's ``/squid-internal-mgr/``, its
icons and error pages) are refused to every client, whatever the host, and no header it adds
names it (``X-Cache``, ``X-Cache-Lookup``, ``X-Squid-Error``, ``Via``); its error pages name a
neutral host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from paddock.vocab.networks import PRIVATE_V4, PRIVATE_V6

# Never reached through the gateway, whatever a name resolves to: what the operator keeps
# sandboxes from, plus this host and "this network".
ALWAYS_INTERNAL = (*PRIVATE_V4, *PRIVATE_V6, "127.0.0.0/8", "0.0.0.0/8", "::1/128", "::/128")
# %'ea in the access log: what the helper said of the connection (sandbox, decision, rule), as
# it said it (the helper leaves no control character in it).
LOG_FORMAT = "%ts.%03tu %>a %rm %ru %>Hs %Ss %'ea sni=%ssl::>sni"
# Squid's own URLs, on any host (it serves them itself when the path starts so).
SQUID_URLS = "^/squid-internal-"
# The headers Squid adds that would name it (its host and port, its errors).
OWN_HEADERS = ("X-Cache", "X-Cache-Lookup", "X-Squid-Error")
VISIBLE_HOSTNAME = "egress-gateway"


@dataclass(frozen=True)
class SquidConfig:
    listen: str  # HOST:PORT
    runtime: Path  # writable: the pid file and the throwaway certificate
    relay: str  # socat: Squid's helper, relaying to the gateway's sockets
    internal: tuple[str, ...] = ALWAYS_INTERNAL
    vouched: tuple[str, ...] = ()  # internal addresses the administrator lets through
    hosts_file: Path | None = None  # names the gateway resolves without DNS
    nameservers: tuple[str, ...] = ()  # DNS servers; none: the host's resolv.conf
    user: str | None = None  # the user Squid switches to when started as root

    @property
    def certificate(self) -> Path:
        return self.runtime / "peek.pem"

    def socket(self, helper: str) -> Path:
        return self.runtime / f"{helper}.sock"

    def sockets(self) -> tuple[Path, ...]:
        return self.socket("access"), self.socket("sni")

    def helper(self, name: str) -> str:
        return f"{self.relay} STDIO UNIX-CONNECT:{self.socket(name)}"


def render_squid_conf(config: SquidConfig) -> str:
    lines = [
        f"http_port {config.listen} ssl-bump cert={config.certificate} "
        "generate-host-certificates=off",
        f"pid_filename {config.runtime / 'squid.pid'}",
        "cache_log stdio:/dev/stderr",
        f"logformat paddock {LOG_FORMAT}",
        "access_log stdio:/dev/stdout paddock",
        "cache deny all",
        "cache_mem 0 MB",
        "pinger_enable off",
        "shutdown_lifetime 1 seconds",
        "via off",
        "forwarded_for delete",
        "httpd_suppress_version_string on",
        f"visible_hostname {VISIBLE_HOSTNAME}",
        *(f"reply_header_access {header} deny all" for header in OWN_HEADERS),
        # Every connection asks the helper afresh (a decision follows the policy at once).
        "external_acl_type paddock_access ttl=0 negative_ttl=0 children-max=1 "
        f"children-startup=1 concurrency=100 %SRC %DST %PORT {config.helper('access')}",
        "external_acl_type paddock_sni ttl=0 negative_ttl=0 children-max=1 "
        f"children-startup=1 concurrency=100 %DST %ssl::>sni {config.helper('sni')}",
        "acl paddock_access external paddock_access",
        "acl paddock_sni external paddock_sni",
        "acl step1 at_step SslBump1",
        "acl step2 at_step SslBump2",
        f"acl paddock_internal dst {' '.join(config.internal)}",
        f"acl paddock_squid urlpath_regex {SQUID_URLS}",
        # Before anything asks a helper or resolves a name: the manager is Squid's own ACL.
        "http_access deny manager",
        "http_access deny paddock_squid",
    ]
    if config.vouched:
        lines.append(f"acl paddock_vouched dst {' '.join(config.vouched)}")
        lines.append("http_access deny paddock_internal !paddock_vouched")
    else:
        lines.append("http_access deny paddock_internal")
    lines += [
        "http_access allow paddock_access",
        "http_access deny all",
        "ssl_bump peek step1",
        "ssl_bump splice step2 paddock_sni",
        "ssl_bump terminate all",
    ]
    if config.hosts_file is not None:
        lines.append(f"hosts_file {config.hosts_file}")
    if config.user is not None:
        lines.append(f"cache_effective_user {config.user}")
    if config.nameservers:
        lines.append(f"dns_nameservers {' '.join(config.nameservers)}")
    return "\n".join(lines) + "\n"
