"""Auth policies applied to certificate logins (auth-enrollment-pki.md §2.5 steps 5–7, §3.3):
``primary.cert.allowed``, ``allowExpiredCerts`` and secondary factors after a cert login."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.auth.conftest import code, enroll_totp
from tests.conftest import CLIENT, Api, assert_error
from tests.fastclient import FastClient
from ziti_lite import clock, tls


def client_cert(ctl, cn: str, days: int = 1) -> str:
    """A client certificate issued by the controller's signing CA, valid ``days`` from now."""
    signer = x509.load_pem_x509_certificate(ctl.state["signer_cert"].encode())
    signer_key = serialization.load_pem_private_key(ctl.state["signer_key"].encode(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = clock.now()
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(signer.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(signer_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture
def certs(app):
    wrapper = tls.WithClientCert(app)
    with FastClient(wrapper) as c:
        yield c, wrapper


def cert_user(net, ctl, policy: str | None = None) -> tuple[str, str]:
    ident = net.identity(policy=policy)
    pem = client_cert(ctl, ident)
    net.admin.create("authenticators", {"method": "cert", "identityId": ident, "certPem": pem})
    return ident, pem


def cert_login(certs, pem: str):
    client, wrapper = certs
    wrapper.chain = [pem]
    return client.post(CLIENT + "/authenticate?method=cert", json={})


def test_cert_allowed_by_default_and_refused_by_policy(net, ctl, certs):
    _, pem = cert_user(net, ctl)
    assert cert_login(certs, pem).status_code == 200
    _, pem = cert_user(net, ctl, net.policy(primary={"cert": {"allowed": False}}))
    assert_error(cert_login(certs, pem), 401, "INVALID_AUTH")


def test_expired_certificates_per_policy(net, ctl, certs):
    _, lenient = cert_user(net, ctl)
    _, strict = cert_user(net, ctl, net.policy(primary={"cert": {"allowExpiredCerts": False}}))
    assert cert_login(certs, strict).status_code == 200
    clock.advance(2 * 24 * 3600)                      # both certificates have expired
    assert cert_login(certs, lenient).status_code == 200
    assert_error(cert_login(certs, strict), 401, "INVALID_AUTH")


def test_require_totp_after_cert_login(net, ctl, certs):
    _, pem = cert_user(net, ctl, net.policy(secondary={"requireTotp": True}))
    r = cert_login(certs, pem)
    assert r.status_code == 200
    assert [q["typeId"] for q in r.json()["data"]["authQueries"]] == ["MFA"]
    api = Api(certs[0], CLIENT, r.json()["data"]["token"])
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")
    secret, _ = enroll_totp(api)
    assert api.get("/current-identity").status_code == 200
    again = Api(certs[0], CLIENT, cert_login(certs, pem).json()["data"]["token"])
    assert_error(again.get("/current-identity"), 401, "UNAUTHORIZED")
    assert again.post("/authenticate/mfa", json={"code": code(secret)}).status_code == 200
    assert again.get("/current-identity").status_code == 200
