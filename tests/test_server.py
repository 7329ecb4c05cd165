"""The real server: ``ziti-lite serve`` in a subprocess on a loopback port, over TLS.

The client bootstraps trust as an SDK does: it fetches ``/.well-known/est/cacerts`` once
without verification, then verifies the server against that bundle for everything else.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs7

pytestmark = pytest.mark.slow   # real servers in subprocesses

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "Tls-test-Passw0rd"
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, db: Path, *extra: str, env: dict | None = None):
        self.port = free_port()
        self.edge_port = free_port()
        self.base = f"https://127.0.0.1:{self.port}"
        environment = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
        if "ZITI_LITE_ADMIN_PASSWORD" not in (env or {}):
            environment.pop("ZITI_LITE_ADMIN_PASSWORD", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ziti_lite", "serve", "--db", str(db), "--port", str(self.port),
             "--edge-port", str(self.edge_port), "--ctrl-port", "0", *extra],
            cwd=str(REPO), env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s,), daemon=True)
                         for s in (self.proc.stdout, self.proc.stderr)]
        for t in self._readers:
            t.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self) -> None:
        """Poll /version (unverified: trust is not bootstrapped yet) until it answers."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited early ({self.proc.returncode}):\n{self.output}")
            try:
                r = httpx.get(self.base + "/version", verify=False, timeout=2)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"server not ready in {START_TIMEOUT}s:\n{self.output}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError(f"server ignored SIGTERM:\n{self.output}")
        for t in self._readers:
            t.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("tls") / "net.db"
    s = Server(db, "--admin-password", PASSWORD)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def ca_bundle(server) -> str:
    r = httpx.get(server.base + "/.well-known/est/cacerts", verify=False, timeout=5)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/pkcs7-mime")
    certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(r.content))
    assert len(certs) >= 2
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


@pytest.fixture(scope="module")
def tls(ca_bundle) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_bundle)
    return ctx


def test_version_over_verified_tls(server, tls):
    r = httpx.get(server.base + "/version", verify=tls, timeout=5)
    assert r.status_code == 200
    v = r.json()["data"]
    assert v["version"].startswith("v")
    assert v["apiVersions"]["edge"]["v1"]["path"] == "/edge/client/v1"
    assert v["apiVersions"]["edge-management"]["v1"]["apiBaseUrls"] == [f"{server.base}/edge/management/v1"]
    assert r.headers["ziti-instance-id"]
    for host in ("localhost",):
        assert httpx.get(f"https://{host}:{server.port}/version", verify=tls, timeout=5).status_code == 200


def test_tls_version_and_server_certificate(server, tls):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with tls.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            assert s.version() in ("TLSv1.2", "TLSv1.3")
            der = s.getpeercert(binary_form=True)
    cert = x509.load_der_x509_certificate(der)
    assert isinstance(cert.public_key(), rsa.RSAPublicKey), "clients of the 0.29 C SDK need an RSA server key"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    ips = san.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("127.0.0.1") in ips and ipaddress.ip_address("::1") in ips
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in eku


def test_tls_below_1_2_is_refused(server, ca_bundle):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca_bundle)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot even offer TLS < 1.2")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass


def test_login_and_use_the_session(server, tls):
    with httpx.Client(base_url=server.base, verify=tls, timeout=10) as c:
        r = c.post("/edge/management/v1/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
        assert r.status_code == 200, r.text
        token = r.headers["zt-session"]
        assert token == r.json()["data"]["token"]
        r = c.get("/edge/management/v1/current-identity", headers={"zt-session": token})
        assert r.status_code == 200 and r.json()["data"]["isDefaultAdmin"] is True
        r = c.get("/edge/client/v1/current-api-session", headers={"zt-session": token})
        assert r.status_code == 200
        iid = c.post("/edge/management/v1/identities", headers={"zt-session": token},
                     json={"name": "over-tls", "type": "User", "isAdmin": False}).json()["data"]["id"]
        assert c.get(f"/edge/management/v1/identities/{iid}", headers={"zt-session": token}).status_code == 200
        # the unprefixed client API, as SDKs call it before /version has answered
        r = c.post("/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
        assert r.status_code == 200
        r = c.get("/edge/management/v1/identities", headers={"zt-session": ""})
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signals_shut_down_cleanly(tmp_path, sig):
    s = Server(tmp_path / "stop.db", "--admin-password", PASSWORD)
    try:
        s.wait_ready()
    finally:
        code = s.stop(sig)
    assert code == 0, s.output
    assert "Traceback" not in s.output and "Aborted" not in s.output, s.output
    assert "Application shutdown complete" in s.output


def test_generated_admin_password_is_printed_once(tmp_path):
    db = tmp_path / "gen.db"
    s = Server(db)
    try:
        s.wait_ready()
        line = next((ln for ln in s.lines if "password:" in ln), None)
        assert line, s.output
        password = line.rsplit("password:", 1)[1].strip()
        r = httpx.post(s.base + "/edge/management/v1/authenticate?method=password",
                       json={"username": "admin", "password": password}, verify=False, timeout=10)
        assert r.status_code == 200, r.text
    finally:
        assert s.stop() == 0
    again = Server(db)
    try:
        again.wait_ready()
        assert password not in again.output and "password:" not in again.output
        r = httpx.post(again.base + "/edge/management/v1/authenticate?method=password",
                       json={"username": "admin", "password": password}, verify=False, timeout=10)
        assert r.status_code == 200, "the file keeps its admin across restarts"
    finally:
        assert again.stop() == 0
