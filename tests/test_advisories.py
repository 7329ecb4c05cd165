"""Upstream's security fixes after v1.3.3 that touch the controller's API, checked against
ziti-lite: each test shows the attack failing here, and every 401 says why in a
``WWW-Authenticate`` header (as upstream v2.0 does).

1. ``/current-api-session/certificates`` listed other API sessions' certificates: here every
   read, list and delete is scoped to the caller's API session.
2. Server-side fetches of external signers' JWKS endpoints could be steered to internal
   addresses: here only the URL an admin configured is fetched (admins only may set it), a
   redirect is refused, and nothing in a token (``jku``, ``x5u``, ``iss``) names a URL to fetch.
3. Token enrollment that skipped audience or issuer checks: ``/enroll?method=token`` enrolls
   nobody, ``/enroll/token`` verifies a JWT as an ext-jwt login does (and enrolls only for a
   signer that allows it, ``tests/enroll/test_token.py``), and an external JWT with the wrong
   audience or issuer neither logs in nor enrolls.
4. Request bodies read without a size limit before authentication: a route that needs a
   session answers 401 without reading the body, and public routes (login, enrollment) stop
   at 4 MiB, refusing a larger declared ``Content-Length`` before reading any of it.
"""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.auth.test_extjwt import AUDIENCE, ISSUER, Keys, cert_signer, claims, ext_login, fp_kid, jwk, sign
from tests.builders import Net
from tests.conftest import CLIENT, MGMT, Api, assert_error
from tests.enroll.conftest import running


def _csr() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    req = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "session-cert")]))
           .sign(key, hashes.SHA256()))
    return req.public_bytes(serialization.Encoding.PEM).decode()


def _challenge(r) -> str:
    assert r.status_code == 401, r.text
    value = r.headers["www-authenticate"]
    assert value.startswith('zt-session realm="openziti", error="') and 'error_description="' in value
    return value


# ---------------------------------------------------------------- 1. api session certificates
def test_api_session_certificates_are_scoped_to_the_callers_api_session(admin):
    net = Net(admin)
    _, user = net.user()
    sessions = [net.login(user), net.login(user)]      # one identity, two API sessions
    _, other_user = net.user()
    sessions.append(net.login(other_user))             # and another identity's
    client = [Api(s.client, CLIENT, s.token) for s in sessions]
    ids = []
    for api in client:
        r = api.post("/current-api-session/certificates", json={"csr": _csr()})
        assert r.status_code == 201, r.text
        ids.append(r.json()["data"]["id"])
    for n, api in enumerate(client):
        listed = api.get("/current-api-session/certificates").json()
        assert [c["id"] for c in listed["data"]] == [ids[n]] and listed["meta"]["pagination"]["totalCount"] == 1
        for m, other in enumerate(ids):
            if m != n:
                assert_error(api.get(f"/current-api-session/certificates/{other}"), 404, "NOT_FOUND")
                assert_error(api.delete(f"/current-api-session/certificates/{other}"), 404, "NOT_FOUND")
                # a filter cannot widen the scope
                r = api.get(f'/current-api-session/certificates?filter=id="{other}"')
                assert r.json()["data"] == []
    assert client[0].get(f"/current-api-session/certificates/{ids[0]}").status_code == 200


# ---------------------------------------------------------------- 2. JWKS fetches
class Recorder:
    """A loopback HTTP server that records every request; ``redirect_to`` answers 302 there."""

    def __init__(self, redirect_to: str | None = None, body: bytes = b'{"keys": []}'):
        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.paths.append(self.path)
                if redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorders():
    made: list[Recorder] = []

    def make(**kw) -> Recorder:
        made.append(Recorder(**kw))
        return made[-1]
    yield make
    for r in made:
        r.close()


def test_only_admins_set_the_url_the_controller_fetches(admin):
    net = Net(admin)
    _, user = net.user()
    api = net.login(user, prefix=MGMT)
    body = {"name": "sneaky", "enabled": True, "issuer": ISSUER, "audience": AUDIENCE,
            "jwksEndpoint": "http://169.254.169.254/latest/meta-data"}
    r = api.post("/external-jwt-signers", json=body)
    assert_error(r, 401, "UNAUTHORIZED")
    assert "admin" in _challenge(r)


def test_a_token_cannot_name_the_url_to_fetch(admin, recorders):
    net = Net(admin)
    trap = recorders()
    cert_signer(admin)
    ident = net.identity()
    for header in ({"jku": trap.url + "/jku"}, {"x5u": trap.url + "/x5u"}):
        token = jwt.encode(claims(ident), Keys.other_rsa, algorithm="RS256", headers={"kid": "unknown", **header})
        assert_error(ext_login(net.client, token), 401, "INVALID_AUTH")
    # an issuer that is a URL is only compared, never fetched (no discovery)
    forged = sign(Keys.other_rsa, "unknown", claims(ident, iss=trap.url + "/.well-known/openid-configuration"))
    assert_error(ext_login(net.client, forged), 401, "INVALID_AUTH")
    assert trap.paths == []


def test_a_jwks_endpoint_that_redirects_is_not_followed(admin, recorders):
    net = Net(admin)
    inside = recorders(body=json.dumps({"keys": [jwk(Keys.main, "inner-kid")]}).encode())
    outside = recorders(redirect_to=inside.url + "/internal-only")
    admin.create("external-jwt-signers", {"name": "redirecting", "enabled": True, "issuer": ISSUER,
                                          "audience": AUDIENCE, "jwksEndpoint": outside.url + "/jwks.json"})
    ident = net.identity()
    r = ext_login(net.client, sign(Keys.main, "inner-kid", claims(ident)))
    assert_error(r, 401, "INVALID_AUTH")
    _challenge(r)
    assert outside.paths == ["/jwks.json"] and inside.paths == []


# ---------------------------------------------------------------- 3. token enrollment
def test_no_jwt_enrollment_and_wrong_audience_or_issuer_never_log_in(admin, anon):
    net = Net(admin)
    cert_signer(admin)
    ident = net.identity()
    before = admin.get("/authenticators").json()["meta"]["pagination"]["totalCount"]
    for body in (claims(ident, aud="another-audience"), claims(ident, iss="https://another-issuer.test"),
                 claims(ident)):
        token = sign(Keys.main, fp_kid(), body)
        for path in ("/enroll?method=token", "/enroll/token"):
            r = anon.client.post(path, headers={"authorization": f"Bearer {token}"},
                                 content=_csr(), params={"token": token} if "?" not in path else None)
            assert 400 <= r.status_code < 500, r.text      # refused, whatever the token says
    for body in (claims(ident, aud="another-audience"), claims(ident, iss="https://another-issuer.test")):
        r = ext_login(net.client, sign(Keys.main, fp_kid(), body))
        assert_error(r, 401, "INVALID_AUTH")
        _challenge(r)
    assert admin.get("/authenticators").json()["meta"]["pagination"]["totalCount"] == before
    assert ext_login(net.client, sign(Keys.main, fp_kid(), claims(ident))).status_code == 200   # the control


# ---------------------------------------------------------------- 4. bodies before authentication
def test_a_route_that_needs_a_session_answers_before_reading_the_body(anon):
    r = anon.client.post(MGMT + "/identities", content=b"x" * (5 << 20), headers={"content-type": "application/json"})
    assert_error(r, 401, "UNAUTHORIZED")
    assert "no zt-session header" in _challenge(r)


def test_public_routes_stop_at_the_body_limit(anon):
    big = b'{"username": "' + b"a" * (5 << 20) + b'"}'
    token = "8d7b5b0e-2b0b-4d3c-9e36-2a0f0f0f0f0f"   # well-formed: a malformed one is refused before the body
    for path in (CLIENT + "/authenticate?method=password", f"/enroll?method=ott&token={token}"):
        assert_error(anon.client.post(path, content=big, headers={"content-type": "application/json"}),
                     413, "REQUEST_TOO_LARGE")


@pytest.mark.slow
def test_a_large_declared_length_is_refused_before_the_body_is_sent(live_server):
    host, port = live_server
    with socket.create_connection((host, port), timeout=10) as raw:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(b"POST /edge/client/v1/authenticate?method=password HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n")
            head = s.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head


@pytest.fixture
def live_server(template_db, tmp_path):
    with running(template_db, tmp_path) as live:
        yield "127.0.0.1", live.port


# ---------------------------------------------------------------- WWW-Authenticate
def test_every_401_carries_a_www_authenticate_reason(anon, admin):
    net = Net(admin)
    _, user = net.user()
    api = net.login(user, prefix=MGMT)
    cases = {
        "no zt-session header": anon.client.get(MGMT + "/identities"),
        "is not valid": anon.client.get(MGMT + "/identities", headers={"zt-session": "not-a-session"}),
        "needs an admin": api.get("/identities"),
        "authentication request failed": anon.client.post(
            CLIENT + "/authenticate?method=password", json={"username": "nobody", "password": "nothing-here"}),
    }
    for reason, r in cases.items():
        assert reason in _challenge(r), (reason, r.headers.get("www-authenticate"))
    # and a 200 carries none
    assert "www-authenticate" not in admin.get("/identities").headers
