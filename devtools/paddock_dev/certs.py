"""The local cluster's PKI: a CA, serving certificates, an admin client certificate, and the
service-account signing key, generated with ``cryptography``."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = timedelta(days=365)
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Pki:
    """Paths of the files the control plane reads."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "serving.key"

    @property
    def admin_cert(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _write_key(path: Path, key: PrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _issue(
    subject: x509.Name,
    key: PrivateKey,
    issuer: x509.Name,
    issuer_key: PrivateKey,
    *,
    ca: bool = False,
    usages: tuple[x509.ObjectIdentifier, ...] = (),
    hosts: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def generate_pki(directory: Path, hosts: tuple[str, ...]) -> Pki:
    """Write a fresh CA, a serving certificate for ``hosts`` (used by the API server and by
    kwok's kubelet endpoint), an admin client certificate in ``system:masters`` and the
    service-account signing key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("paddock-local-ca")
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.ca_cert, _issue(ca_name, ca_key, ca_name, ca_key, ca=True))

    serving_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki.serving_key, serving_key)
    _write_cert(
        pki.serving_cert,
        _issue(
            _name("kube-apiserver"),
            serving_key,
            ca_name,
            ca_key,
            usages=(ExtendedKeyUsageOID.SERVER_AUTH,),
            hosts=hosts,
        ),
    )

    admin_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki.admin_key, admin_key)
    _write_cert(
        pki.admin_cert,
        _issue(
            _name("paddock-admin", "system:masters"),
            admin_key,
            ca_name,
            ca_key,
            usages=(ExtendedKeyUsageOID.CLIENT_AUTH,),
        ),
    )

    # Service-account tokens are signed with RSA, which every Kubernetes component accepts.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def issue_client_cert(pki: Pki, common_name: str, organization: str, cert: Path, key: Path) -> None:
    """A client certificate from the cluster's CA (the real node's kubelet identity)."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey)
    client_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(key, client_key)
    _write_cert(
        cert,
        _issue(
            _name(common_name, organization),
            client_key,
            ca_cert.subject,
            ca_key,
            usages=(ExtendedKeyUsageOID.CLIENT_AUTH,),
        ),
    )


def client_kubeconfig(server: str, pki: Pki, user: str, cert: Path, key: Path) -> str:
    """A kubeconfig (YAML) naming ``server``, the cluster's CA and a client certificate by path
    (a node component's: the kubelet's, the NetworkPolicy controller's)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)},
            }
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    return yaml.safe_dump(config)
