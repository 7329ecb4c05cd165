"""Shared fixtures for the PKI tests: one controller PKI per session."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from ziti_lite.pki import ca

HOSTS = ["127.0.0.1", "ctrl.example.com:1280", "::1", "10.1.2.3", "https://api.example.org:8441"]


@pytest.fixture(scope="session")
def pki() -> ca.Pki:
    return ca.create_controller_pki(HOSTS, name="test-ctrl")


def make_ca(cn: str, *, key_type: str = "ec", issuer: ca.KeyPair | None = None,
            path_length: int | None = None, is_ca: bool = True,
            not_before: dt.datetime | None = None, days: int = 30) -> ca.KeyPair:
    """A small CA (or non-CA when is_ca=False) built directly with cryptography."""
    key = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if key_type == "rsa"
           else ec.generate_private_key(ec.SECP256R1()))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    if issuer is None:
        issuer_name, issuer_key = name, key
    else:
        issuer_name, issuer_key = issuer.cert.subject, issuer.key
    nb = not_before or dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(nb).not_valid_after(nb + dt.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=is_ca, path_length=path_length), critical=True))
    cert = b.sign(issuer_key, hashes.SHA256())
    return ca.KeyPair(
        cert.public_bytes(serialization.Encoding.PEM).decode(),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode(),
    )
