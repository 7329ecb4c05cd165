"""Fixtures for enrollment and certificate tests.

* ``live``: a real ziti-lite over TLS (uvicorn in a thread on a loopback port), one per module;
  clients are httpx clients that trust the controller CA bundle and may present a certificate.
* ``certs``: a TestClient whose connection presents a settable client certificate chain
  (``ziti_lite.tls.WithClientCert``), for fast error-path tests.
* small PKI helpers: session-scoped EC keys, external CAs, certificates issued by them.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import shutil
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from starlette.testclient import TestClient

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, MGMT, Api
from tests.fastclient import FastClient
from ziti_lite import clock, tls
from ziti_lite.config import Settings
from ziti_lite.pki.ca import KeyPair
from ziti_lite.pki.csr import build_csr

UTC = dt.UTC


# ------------------------------------------------------------------ keys and certificates
@pytest.fixture(scope="session")
def keys() -> list[str]:
    """A few EC P-256 private keys (PEM), made once."""
    return [ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
        for _ in range(6)]


def _key(pem: str):
    return serialization.load_pem_private_key(pem.encode(), password=None)


def make_ca(cn: str, key_pem: str, issuer: KeyPair | None = None, path_length: int | None = None) -> KeyPair:
    key = _key(key_pem)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    issuer_name, issuer_key = (name, key) if issuer is None else (x509.load_pem_x509_certificate(
        issuer.cert_pem.encode()).subject, _key(issuer.key_pem))
    now = dt.datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(issuer_key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem)


def issue(issuer: KeyPair, cn: str, key_pem: str, *, uris=(), emails=(), days: int = 30,
          not_before: dt.datetime | None = None, eku=(ExtendedKeyUsageOID.CLIENT_AUTH,)) -> str:
    """A leaf certificate for ``key_pem`` issued by ``issuer`` (PEM)."""
    key = _key(key_pem)
    ic = x509.load_pem_x509_certificate(issuer.cert_pem.encode())
    nb = not_before or dt.datetime.now(UTC) - dt.timedelta(hours=1)
    b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
         .issuer_name(ic.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(nb).not_valid_after(nb + dt.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if eku:
        b = b.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    sans = [x509.UniformResourceIdentifier(u) for u in uris] + [x509.RFC822Name(e) for e in emails]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(_key(issuer.key_pem), hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def csr(key_pem: str, cn: str, **kw) -> str:
    return build_csr(cn, key_pem=key_pem, **kw)[0]


def fingerprint(pem: str) -> str:
    from ziti_lite.pki.ca import fingerprint as fp
    return fp(pem)


def ca_body(name: str, cert_pem: str, **over) -> dict:
    body = {"name": name, "certPem": cert_pem, "isAutoCaEnrollmentEnabled": True, "isOttCaEnrollmentEnabled": True,
            "isAuthEnabled": True, "identityRoles": ["from-ca"]}
    body.update(over)
    return body


def register_ca(admin, ca: KeyPair, name: str, key_pem: str, verify: bool = True, **over) -> str:
    """Create a CA entity (and verify it with a certificate whose CN is its token)."""
    ca_id = admin.create("cas", ca_body(name, ca.cert_pem, **over))
    if verify:
        token = admin.get(f"/cas/{ca_id}").json()["data"]["verificationToken"]
        r = admin.post(f"/cas/{ca_id}/verify", content=issue(ca, token, key_pem, eku=()),
                       headers={"content-type": "text/plain"})
        assert r.status_code == 200, r.text
    return ca_id


def ott_identity(admin, name: str) -> tuple[str, str]:
    """An identity with an ott enrollment: (id, token)."""
    iid = admin.create("identities", {"name": name, "type": "User", "isAdmin": False, "enrollment": {"ott": True}})
    return iid, admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["token"]


# ------------------------------------------------------------------ TestClient with a client certificate
@dataclass
class CertClient:
    """A TestClient whose requests present ``chain`` as the TLS client certificates."""
    client: TestClient
    wrapper: tls.WithClientCert

    def present(self, *chain) -> CertClient:
        self.wrapper.chain = [c for c in chain if c]
        return self

    def post(self, path, **kw):
        return self.client.post(path, **kw)

    def get(self, path, **kw):
        return self.client.get(path, **kw)

    def cert_login(self, *chain, prefix: str = CLIENT):
        self.present(*chain)
        return self.client.post(prefix + "/authenticate?method=cert", json={})


@pytest.fixture
def certs(app):
    wrapper = tls.WithClientCert(app)
    with FastClient(wrapper) as c:
        yield CertClient(c, wrapper)


@pytest.fixture
def cadmin(certs, admin_token):
    """Admin API on the same certificate-capable client."""
    return Api(certs.client, token=admin_token)


# ------------------------------------------------------------------ a live controller over TLS
@dataclass
class Live:
    url: str
    port: int
    ctl: object
    ca_bundle: str
    tmp: str
    _n: list = field(default_factory=lambda: [0])
    clients: list = field(default_factory=list)

    def client(self, cert_pem: str | None = None, key_pem: str | None = None, **kw) -> httpx.Client:
        ctx = ssl.create_default_context(cadata=self.ca_bundle)
        if cert_pem:
            self._n[0] += 1
            cf = os.path.join(self.tmp, f"c{self._n[0]}.pem")
            kf = os.path.join(self.tmp, f"k{self._n[0]}.pem")
            with open(cf, "w") as f:
                f.write(cert_pem)
            with open(kf, "w") as f:
                f.write(key_pem)
            ctx.load_cert_chain(cf, kf)
        c = httpx.Client(base_url=self.url, verify=ctx, timeout=10, **kw)
        self.clients.append(c)
        return c

    def admin(self) -> LiveApi:
        c = self.client()
        r = c.post(MGMT + "/authenticate?method=password", json={"username": ADMIN_USER, "password": ADMIN_PASSWORD})
        assert r.status_code == 200, r.text
        return LiveApi(c, r.json()["data"]["token"])

    def cert_login(self, cert_pem: str, key_pem: str, prefix: str = CLIENT) -> tuple[httpx.Client, httpx.Response]:
        c = self.client(cert_pem, key_pem)
        return c, c.post(prefix + "/authenticate?method=cert", json={"sdkInfo": {"type": "test"}})


class LiveApi:
    """Management API calls over the live TLS connection, with an admin session."""

    def __init__(self, client: httpx.Client, token: str):
        self.client, self.token = client, token

    def request(self, method, path, **kw):
        headers = {"zt-session": self.token, **kw.pop("headers", {})}
        return self.client.request(method, MGMT + path, headers=headers, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def create(self, collection, body) -> str:
        r = self.post(f"/{collection}", json=body)
        assert r.status_code == 201, r.text
        return r.json()["data"]["id"]


def _bundle_from_well_known(url: str) -> str:
    r = httpx.get(url + "/.well-known/est/cacerts", verify=False, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"] == "application/pkcs7-mime"
    certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(r.text))
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


@contextlib.contextmanager
def running(template_db, tmp, edge: bool = False, db=None, ctrl: bool = False, **extra):
    """A real ziti-lite (uvicorn in a thread, loopback ports) on a copy of the template database
    (or on ``db`` as it is); with ``edge`` its embedded edge router listens too (on
    ``handle.ctl.edge_router.port``), with ``ctrl`` the control channel for real routers (on
    ``handle.ctl.ctrl_server.port``). ``extra``: further settings."""
    from ziti_lite.server import build
    if db is None:
        db = tmp / "live.db"
        shutil.copy(template_db, db)
    sock = _loopback_socket()
    port = sock.getsockname()[1]
    extra.setdefault("loop", os.environ.get("ZITI_LITE_LOOP", "auto"))   # tests/conftest.py's --loop
    settings = Settings(db=str(db), host="127.0.0.1", port=port, admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                        **extra)
    server = build(settings, log_level="warning")
    if edge:
        server.controller.edge_sock = _loopback_socket()
    if ctrl:
        server.controller.ctrl_sock = _loopback_socket()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.01)
    url = f"https://127.0.0.1:{port}"
    handle = Live(url, port, server.controller, _bundle_from_well_known(url), str(tmp))
    try:
        yield handle
    finally:
        for c in handle.clients:  # idle TLS connections would hold the shutdown until their timeout
            c.close()
        server.should_exit = True
        thread.join(10)
        sock.close()
        server.controller.store.close()
        clock.reset()


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="module")
def live(template_db, tmp_path_factory):
    with running(template_db, tmp_path_factory.mktemp("live")) as handle:
        yield handle
