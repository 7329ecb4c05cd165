"""``ziti-edge-tunnel`` 1.18.7 (and the C SDK 1.18.7 inside it) enrolling from an identity
provider, on ziti-lite and on the real v2.0.3 controller (``ziti edge quickstart``).

The identity provider is the tests' own (``Issuer``): an RSA key whose certificate is the
signer's ``certPem``, and a small OpenID provider on loopback serving what the SDK's OIDC client
asks for (discovery, an authorization endpoint that answers at once with a code, a token endpoint
that checks the PKCE verifier and returns JWTs of that key). ``ziti-edge-tunnel enroll -j <network
JWT> -E cert -p <signer>`` prints the authorization URL for a browser; ``Browser`` plays that
browser (the redirect goes to the SDK's callback on ``localhost:20314``, IPv6 loopback). The
enrolled identity then runs ``ziti-edge-tunnel run-host``: it logs in with its new certificate
and, on ziti-lite (whose embedded edge router is there), hosts a service: its terminator appears.
A second case enrolls to a token (``-E token``, the signer's ``enrollToTokenEnabled``).

The tunneler is not built here: it comes from ``$ZITI_EDGE_TUNNEL``, else
``~/.cache/ziti-lite/ziti-edge-tunnel-v1.18.7/ziti-edge-tunnel``; the tests skip, saying why,
without it, and without the v2.0.3 ``ziti`` binary for the upstream case. The SDK refuses these
enrollments from a controller whose ``/version`` names a line below 2.0: the ziti-lite case skips,
saying so, where it does."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.auth.test_extjwt import pem, self_signed
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, MGMT
from tests.edge.conftest import Peer
from tests.enroll.conftest import csr
from tests.interop.conftest import start_quickstart
from tests.interop.test_ziti_cli_v2 import V2
from ziti_lite import testing

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TUNNELER_VERSION = "v1.18.7"
SIGNER = "tunneler-idp"
CLIENT_ID = "ziti-tunneler-test"
AUDIENCE = "openziti-tunneler"
CALLBACK_PORT = 20314          # the C SDK's fixed OIDC redirect port ('OZ')
HOST_CONFIG = "NH5p4FpGR"      # host.v1


def _tunneler_path() -> str:
    named = os.environ.get("ZITI_EDGE_TUNNEL")
    if named:
        return named
    base = os.environ.get("ZITI_LITE_GO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ziti-lite")
    return os.path.join(base, f"ziti-edge-tunnel-{TUNNELER_VERSION}", "ziti-edge-tunnel")


@pytest.fixture(scope="module")
def tunneler() -> str:
    path = _tunneler_path()
    if not os.access(path, os.X_OK):
        pytest.skip(f"no ziti-edge-tunnel {TUNNELER_VERSION} ($ZITI_EDGE_TUNNEL or {path}): "
                    "build it from its public sources for this machine to run these tests")
    return path


# ---------------------------------------------------------------- the identity provider
def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """An OpenID provider on loopback whose single user logs in without a prompt: ``user``
    (its ``sub`` and claims) is who the next authorization is for."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.cert: x509.Certificate = self_signed(self.key, "tunneler-test-idp")
        self.kid = _b64url(hashlib.sha256(pem(self.cert).encode()).digest())[:16]
        self.user: dict = {}
        self.codes: dict[str, dict] = {}
        self.seen: list[tuple[str, dict]] = []     # (endpoint, its parameters), in order
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def token(self, **extra) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "iat": now, "nbf": now - 5, "exp": now + 600, **self.user, **extra}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": self.kid})

    def _discovery(self) -> dict:
        return {"issuer": self.url, "authorization_endpoint": self.url + "/authorize",
                "token_endpoint": self.url + "/token", "jwks_uri": self.url + "/keys",
                "response_types_supported": ["code"], "grant_types_supported": ["authorization_code"],
                "code_challenge_methods_supported": ["S256"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"]}

    def _authorize(self, q: dict) -> tuple[int, dict, dict | None]:
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" \
                or q.get("client_id") != CLIENT_ID or not q.get("code_challenge") or not q.get("redirect_uri"):
            return 400, {}, {"error": "invalid_request"}
        code = secrets.token_urlsafe(24)
        self.codes[code] = dict(q)
        query = urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
        return 302, {"location": f"{q['redirect_uri']}?{query}"}, None

    def _token(self, form: dict) -> tuple[int, dict, dict | None]:
        asked = self.codes.pop(form.get("code", ""), None)
        if asked is None or form.get("grant_type") != "authorization_code":
            return 400, {}, {"error": "invalid_grant"}
        challenge = _b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
        if challenge != asked["code_challenge"] or form.get("redirect_uri") != asked["redirect_uri"] \
                or form.get("client_id") != CLIENT_ID:
            return 400, {}, {"error": "invalid_grant"}
        return 200, {}, {"access_token": self.token(scope=asked.get("scope", "")), "id_token": self.token(),
                         "token_type": "Bearer", "expires_in": 600}

    def _handler(self):
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, headers: dict, body: dict | None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                issuer.seen.append((url.path, q))
                if url.path == "/.well-known/openid-configuration":
                    self._answer(200, {}, issuer._discovery())
                elif url.path == "/authorize":
                    self._answer(*issuer._authorize(q))
                else:
                    self._answer(404, {}, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                path = urllib.parse.urlsplit(self.path).path
                issuer.seen.append((path, {k: v for k, v in form.items() if k != "code_verifier"}))
                if path == "/token":
                    self._answer(*issuer._token(form))
                else:
                    self._answer(404, {}, {"error": "not_found"})

        return Handler


@pytest.fixture
def issuer():
    idp = Issuer()
    yield idp
    idp.close()


# ---------------------------------------------------------------- the tunneler and its "browser"
class Tunneler:
    """One ``ziti-edge-tunnel`` process; its output kept line by line. An authorization URL it
    prints for a browser is followed as a browser would (``Browser``)."""

    def __init__(self, binary: str, args: list[str], home: Path, issuer: Issuer | None = None):
        home.mkdir(parents=True, exist_ok=True)
        bare = home / "bin"            # a PATH without xdg-open: no real browser is ever started
        bare.mkdir(exist_ok=True)
        env = {"HOME": str(home), "PATH": str(bare), "LANG": "C"}
        self.lines: list[str] = []
        self.browser: list[tuple[int, str]] = []   # the callback page's status and text
        self.issuer = issuer
        self.proc = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, cwd=home, text=True, errors="replace",
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout as out:
            for line in out:
                self.lines.append(line)
                url = line.strip()
                if self.issuer is not None and url.startswith(self.issuer.url + "/authorize?"):
                    threading.Thread(target=self._browse, args=(url,), daemon=True).start()

    def _browse(self, url: str) -> None:
        """What a browser does with the URL: the provider answers with a redirect to the SDK's
        callback on ``localhost`` (which the SDK listens on at IPv6 loopback), followed there."""
        try:
            r = httpx.get(url, follow_redirects=False, timeout=10)
            if r.status_code != 302:
                self.browser.append((r.status_code, r.text))
                return
            target = urllib.parse.urlsplit(r.headers["location"])
            assert target.hostname == "localhost" and target.port == CALLBACK_PORT, target
            with httpx.Client(transport=httpx.HTTPTransport(local_address="::1"), timeout=40) as b:
                page = b.get(target._replace(netloc=f"[::1]:{CALLBACK_PORT}").geturl())
            self.browser.append((page.status_code, page.text))
        except (httpx.HTTPError, AssertionError, KeyError) as e:
            self.browser.append((0, repr(e)))

    def wait(self, timeout: float = 90) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"ziti-edge-tunnel did not finish in {timeout}s:\n{self.output[-4000:]}")
        self.reader.join(5)
        return rc

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.output)
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"ziti-edge-tunnel never logged {pattern!r}:\n{self.output[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):      # it may end meanwhile
                os.killpg(self.proc.pid, signal.SIGTERM)        # its own session, started here
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def _callback_port_free() -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # as the SDK binds it
        try:
            s.bind(("::1", CALLBACK_PORT))
        except OSError as e:
            pytest.skip(f"the C SDK's OIDC callback port [::1]:{CALLBACK_PORT} is taken here ({e})")


# ---------------------------------------------------------------- the controllers
class Network:
    """A controller seen through its public APIs: the admin's management calls, the client API."""

    def __init__(self, url: str, user: str, password: str, lite: bool, ca_pem: str = ""):
        self.url = url
        self.lite = lite       # ziti-lite, whose embedded edge router can host services
        self.ca_pem = ca_pem
        self.http = httpx.Client(base_url=url, verify=False, timeout=30)   # loopback, each one's own PKI
        r = self.http.post(MGMT + "/authenticate?method=password", json={"username": user, "password": password})
        assert r.status_code == 200, r.text
        self.http.headers["zt-session"] = r.json()["data"]["token"]

    def create(self, collection: str, body: dict) -> str:
        r = self.http.post(f"{MGMT}/{collection}", json=body)
        assert r.status_code == 201, (collection, r.status_code, r.text)
        return r.json()["data"]["id"]

    def list(self, collection: str, flt: str) -> list[dict]:
        r = self.http.get(f"{MGMT}/{collection}", params={"filter": flt})
        assert r.status_code == 200, r.text
        return r.json()["data"]

    def version(self) -> str:
        return self.http.get("/version").json()["data"]["version"]

    def network_jwt(self, where: Path) -> Path:
        r = self.http.get(CLIENT + "/network-jwts")
        assert r.status_code == 200, r.text
        where.write_text(r.json()["data"][0]["token"])
        return where

    def signer(self, idp: Issuer, *, to_cert: bool, to_token: bool) -> str:
        return self.create("external-jwt-signers", {
            "name": SIGNER, "issuer": idp.url, "audience": AUDIENCE, "certPem": pem(idp.cert), "kid": idp.kid,
            "enabled": True, "externalAuthUrl": idp.url, "clientId": CLIENT_ID, "scopes": ["email"],
            "useExternalId": True, "claimsProperty": "sub",
            "targetToken": "ACCESS", "enrollToCertEnabled": to_cert, "enrollToTokenEnabled": to_token,
            "enrollNameClaimsSelector": "/preferred_username", "enrollAttributeClaimsSelector": "/groups"})

    def close(self) -> None:
        self.http.close()


@pytest.fixture(params=["ziti-lite", V2])
def network(request, template_db, tmp_path):
    """Each controller in turn: ziti-lite (with its embedded edge router) and the real v2.0.3."""
    if request.param == V2:
        real = start_quickstart(request.getfixturevalue("ziti2"), tmp_path / "openziti-v2", V2)
        try:
            net = Network(real.url, real.admin_user, real.admin_password, lite=False)
            yield net
            net.close()
        finally:
            real.stop()
        return
    db = tmp_path / "lite.db"
    shutil.copy(template_db, db)
    ctl = testing.start(db, ADMIN_PASSWORD, edge=True)
    net = Network(ctl.url, ADMIN_USER, ADMIN_PASSWORD, lite=True, ca_pem=ctl.ca_pem)
    try:
        version = net.version()
        if int(version.lstrip("v").split(".")[0]) < 2:
            pytest.skip(f"ziti-lite's /version names {version}: the C SDK 1.18 enrolls from an identity "
                        "provider only where a controller names the 2.0 line")
        yield net
    finally:
        net.close()
        ctl.stop()


# ---------------------------------------------------------------- the tests
def _enroll(tunneler: str, net: Network, idp: Issuer, mode: str, tmp: Path) -> tuple[Tunneler, Path]:
    _callback_port_free()
    out = tmp / f"enrolled-{mode}.json"
    jwt_file = net.network_jwt(tmp / "network.jwt")
    run = Tunneler(tunneler, ["enroll", "-j", str(jwt_file), "-i", str(out), "-E", mode, "-p", SIGNER],
                   tmp / f"home-{mode}", idp)
    rc = run.wait()
    assert rc == 0, run.output[-4000:]
    return run, out


class EchoServer:
    """A TCP server on loopback, the hosted service's far end: each connection's first line is
    answered ``echo:<line>``, then the connection is closed."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):       # closed at the end of the test
            while True:
                conn, _ = self.sock.accept()
                with conn, conn.makefile("rb") as f:
                    conn.sendall(b"echo:" + f.readline())

    def close(self) -> None:
        self.sock.close()


def _hosted_service(net: Network, port: int) -> str:
    """A service the identities of ``#tun-hosts`` bind (host.v1 to ``port`` on loopback) and
    those of ``#tun-dialers`` dial, over every edge router: what ``run-host`` hosts."""
    config = net.create("configs", {"name": "tun-hosted-host", "configTypeId": HOST_CONFIG,
                                    "data": {"protocol": "tcp", "address": "127.0.0.1", "port": port}})
    service = net.create("services", {"name": "tun-hosted", "encryptionRequired": True, "configs": [config]})
    for kind, role in (("Bind", "#tun-hosts"), ("Dial", "#tun-dialers")):
        net.create("service-policies", {"name": f"tun-{kind}", "type": kind, "semantic": "AnyOf",
                                        "identityRoles": [role], "serviceRoles": [f"@{service}"]})
    net.create("edge-router-policies", {"name": "tun-ers", "semantic": "AnyOf",
                                        "identityRoles": ["#tun-hosts", "#tun-dialers"], "edgeRouterRoles": ["#all"]})
    net.create("service-edge-router-policies", {"name": "tun-sers", "semantic": "AnyOf",
                                                "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    return service


def _dialer(net: Network, tmp: Path) -> str:
    """An identity of ``#tun-dialers`` enrolled with a one-time token; its identity file."""
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    iid = net.create("identities", {"name": "tun-dialer", "type": "Device", "isAdmin": False,
                                    "roleAttributes": ["tun-dialers"], "enrollment": {"ott": True}})
    token = net.http.get(f"{MGMT}/identities/{iid}").json()["data"]["enrollment"]["ott"]["token"]
    r = net.http.post(f"/enroll?method=ott&token={token}", content=csr(key_pem, iid),
                      headers={"content-type": "application/x-pem-file", "accept": "application/x-pem-file"})
    assert r.status_code == 200, r.text
    path = tmp / "dialer.json"
    path.write_text(json.dumps({"ztAPI": net.url, "id": {"cert": r.text, "key": key_pem, "ca": net.ca_pem}}))
    return str(path)


def _dial(path: str, service: str) -> None:
    """The C SDK (the ``openziti`` wheel's) dials ``service``: the line comes back through the
    tunneler's hosting from the echo server."""
    peer = Peer("dial", path)
    try:
        ev = peer.next(kind="loaded")
        assert ev["event"] == "loaded", ev.get("log", ev)
        peer.send(op="echo", service=service, line="through the tunneler")
        ev = peer.next(60, kind="echo")
        assert ev.get("reply") == "echo:through the tunneler\n", ev.get("log", ev)
    finally:
        peer.stop()


def test_enroll_to_a_certificate_then_host(tunneler, network, issuer, tmp_path):
    """``enroll -E cert``: the provider's code flow (PKCE), ``POST /enroll/token`` with a CSR,
    the identity file holds the issued certificate; the identity is named and given role
    attributes from the claims, and ``run-host`` logs in with that certificate (and hosts a
    service where an edge router is there to host it on)."""
    network.signer(issuer, to_cert=True, to_token=False)
    issuer.user = {"sub": "tun-cert-user", "preferred_username": "tunneler-cert", "groups": ["tun-hosts"]}
    run, out = _enroll(tunneler, network, issuer, "cert", tmp_path)
    assert any(status == 200 for status, _ in run.browser), (run.browser, run.output[-3000:])
    assert [p for p, _ in issuer.seen][:3] == ["/.well-known/openid-configuration", "/authorize", "/token"]
    authorize = dict(issuer.seen)["/authorize"]
    assert authorize["audience"] == AUDIENCE and authorize["scope"] == "openid email", authorize

    config = json.loads(out.read_text())
    cert = x509.load_pem_x509_certificate(config["id"]["cert"].encode())
    assert config["id"]["key"] and config["ztAPI"].startswith(network.url), config["ztAPI"]
    [ident] = network.list("identities", 'externalId="tun-cert-user"')
    assert ident["name"] == "tunneler-cert" and ident["roleAttributes"] == ["tun-hosts"], ident
    assert cert.subject.rfc4514_string() == "CN=enrollToCert,O=OpenZiti"     # the SDK's CSR, as signed
    [authenticator] = network.http.get(f"{MGMT}/identities/{ident['id']}/authenticators").json()["data"]
    assert authenticator["method"] == "cert", authenticator
    assert authenticator["fingerprint"] == cert.fingerprint(hashes.SHA1()).hex(), authenticator

    echo = EchoServer()
    service = _hosted_service(network, echo.port) if network.lite else None
    host = Tunneler(tunneler, ["run-host", "-i", str(out), "-v", "4"], tmp_path / "home-host")
    try:
        host.wait_for(r"ziti_ctx\[tunneler-cert\] connected to controller", 60)
        host.wait_for(r"context event : status is OK", 10)
        if service is not None:
            hosted = f'service="{service}" and hostId="{ident["id"]}"'
            deadline = time.monotonic() + 60
            while not network.list("terminators", hosted) and time.monotonic() < deadline:
                time.sleep(0.5)
            [term] = network.list("terminators", hosted)
            assert term["binding"] == "edge", term
            _dial(_dialer(network, tmp_path), "tun-hosted")
    finally:
        host.stop()
        echo.close()


def test_enroll_to_a_token(tunneler, network, issuer, tmp_path):
    """``enroll -E token``: ``POST /enroll/token`` without a CSR creates the identity, which logs
    in with the provider's JWTs; the identity file keeps no certificate."""
    network.signer(issuer, to_cert=False, to_token=True)
    issuer.user = {"sub": "tun-token-user", "preferred_username": "tunneler-token", "groups": ["tun-users"]}
    run, out = _enroll(tunneler, network, issuer, "token", tmp_path)
    assert any(status == 200 for status, _ in run.browser), (run.browser, run.output[-3000:])
    assert "enrollToToken complete" in run.output, run.output[-3000:]
    config = json.loads(out.read_text())
    assert not config["id"].get("cert") and config["ztAPI"].startswith(network.url), config
    [ident] = network.list("identities", 'externalId="tun-token-user"')
    assert ident["name"] == "tunneler-token" and ident["roleAttributes"] == ["tun-users"], ident
    # the provider's next token logs the identity in (no certificate, no password)
    r = httpx.post(network.url + CLIENT + "/authenticate?method=ext-jwt", json={}, verify=False,
                   headers={"authorization": f"Bearer {issuer.token()}"})
    assert r.status_code == 200 and r.json()["data"]["identity"]["id"] == ident["id"], r.text
