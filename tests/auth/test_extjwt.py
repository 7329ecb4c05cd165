"""External JWT signers: ``POST /authenticate?method=ext-jwt`` and the ``requireExtJwtSigner``
secondary factor (auth-enrollment-pki.md §2.6, §3.3, §5.3, §5.4).

Keys come from a signer's ``certPem`` or from a JWKS served over HTTPS by a local server on
127.0.0.1 with a self-signed certificate, trusted through ``ZITI_LITE_JWKS_CA_FILE``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import http.server
import ipaddress
import json
import ssl
import threading

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from tests.auth.conftest import code, enroll_totp
from tests.conftest import CLIENT, MGMT, assert_error
from ziti_lite import clock

ISSUER = "https://idp.example.test"
AUDIENCE = "openziti-test"


# ---------------------------------------------------------------- keys, certificates, tokens
def self_signed(key, cn: str, ip: str | None = None, days: int = 30) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
         .not_valid_after(now + dt.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if ip:
        b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
    algo = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return b.sign(key, algo)


def pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(sub: str, **extra) -> dict:
    now = int(clock.now().timestamp())
    out = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300}
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


def sign(key, kid: str | None, body: dict, alg: str = "RS256") -> str:
    headers = {"kid": kid} if kid is not None else {}
    token = jwt.encode(body, key, algorithm=alg, headers=headers)
    if kid is None:  # pyjwt adds no kid by itself; make sure there is none
        assert "kid" not in jwt.get_unverified_header(token)
    return token


def handmade(header: dict, body: dict, secret: bytes | None) -> str:
    """A JWT put together by hand (for algorithms a library refuses to produce)."""
    head = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(body).encode())
    if secret is None:
        return head + "."
    return head + "." + b64url(hmac.new(secret, head.encode(), hashlib.sha256).digest())


class Keys:
    main = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec1 = ec.generate_private_key(ec.SECP256R1())
    ec2 = ec.generate_private_key(ec.SECP384R1())
    ed = ed25519.Ed25519PrivateKey.generate()
    cert = self_signed(main, "idp-signer")


def jwk(key, kid: str, x5c: bool = False) -> dict:
    if x5c:
        der = self_signed(key, kid).public_bytes(serialization.Encoding.DER)
        out = {"kty": "RSA" if isinstance(key, rsa.RSAPrivateKey) else "EC", "kid": kid,
               "x5c": [base64.b64encode(der).decode()]}
        return out
    if isinstance(key, rsa.RSAPrivateKey):
        out = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        out = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    else:
        out = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(key.public_key()))
    out["kid"] = kid
    return out


# ---------------------------------------------------------------- local HTTPS JWKS server
class JwksServer:
    def __init__(self, tmp_path):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self_signed(key, "127.0.0.1", ip="127.0.0.1")
        self.ca_file = tmp_path / "jwks-ca.pem"
        self.ca_file.write_text(pem(cert))
        key_file = tmp_path / "jwks-key.pem"
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        self.keys: list[dict] = []
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                data = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.ca_file), str(key_file))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}/.well-known/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def jwks(tmp_path, monkeypatch):
    server = JwksServer(tmp_path)
    monkeypatch.setenv("ZITI_LITE_JWKS_CA_FILE", str(server.ca_file))
    yield server
    server.close()


# ---------------------------------------------------------------- signers and logins
def cert_signer(admin, **extra) -> str:
    body = {"name": "cert-signer", "enabled": True, "issuer": ISSUER, "audience": AUDIENCE,
            "certPem": pem(Keys.cert), **extra}
    return admin.create("external-jwt-signers", body)


def jwks_signer(admin, url: str, **extra) -> str:
    body = {"name": "jwks-signer", "enabled": True, "issuer": ISSUER, "audience": AUDIENCE, "jwksEndpoint": url,
            **extra}
    return admin.create("external-jwt-signers", body)


def ext_login(client, token: str | list[str] | None, prefix: str = CLIENT):
    tokens = token if isinstance(token, list) else [token] if token else []
    headers = [("authorization", f"Bearer {t}") for t in tokens]
    return client.post(prefix + "/authenticate?method=ext-jwt", headers=headers, json={})


def fp_kid() -> str:
    return hashlib.sha1(Keys.cert.public_bytes(serialization.Encoding.DER)).hexdigest()


@pytest.fixture
def cert_setup(net, admin):
    signer = cert_signer(admin)
    ident = net.identity()
    return signer, ident


# ---------------------------------------------------------------- primary: certPem signer
@pytest.mark.parametrize("prefix", [CLIENT, MGMT])
def test_good_token_logs_in(net, cert_setup, prefix):
    signer, ident = cert_setup
    r = ext_login(net.client, sign(Keys.main, fp_kid(), claims(ident)), prefix)
    assert r.status_code == 200, r.text
    s = r.json()["data"]
    assert (s["identityId"], s["authenticatorId"], s["isCertExtendable"]) == (ident, f"extJwtId:{signer}", False)
    assert r.headers["zt-session"] == s["token"]


def test_configured_kid_and_audience_lists(net, admin):
    cert_signer(admin, kid="my-kid")
    ident = net.identity()
    assert ext_login(net.client, sign(Keys.main, "my-kid", claims(ident, aud=["a", AUDIENCE]))).status_code == 200
    assert_error(ext_login(net.client, sign(Keys.main, fp_kid(), claims(ident))), 401, "INVALID_AUTH")


REFUSED = {
    "wrong signature": lambda ident: sign(Keys.other_rsa, fp_kid(), claims(ident)),
    "wrong issuer": lambda ident: sign(Keys.main, fp_kid(), claims(ident, iss="https://evil.example")),
    "wrong audience": lambda ident: sign(Keys.main, fp_kid(), claims(ident, aud="someone-else")),
    "no audience": lambda ident: sign(Keys.main, fp_kid(), claims(ident, aud=None)),
    "unknown kid": lambda ident: sign(Keys.main, "no-such-kid", claims(ident)),
    "no kid": lambda ident: sign(Keys.main, None, claims(ident)),
    "expired": lambda ident: sign(Keys.main, fp_kid(), claims(ident, exp=int(clock.now().timestamp()) - 1)),
    "not yet valid": lambda ident: sign(Keys.main, fp_kid(), claims(ident, nbf=int(clock.now().timestamp()) + 60)),
    "unknown subject": lambda ident: sign(Keys.main, fp_kid(), claims("no-such-identity")),
    "alg none": lambda ident: handmade({"alg": "none", "kid": fp_kid(), "typ": "JWT"}, claims(ident), None),
    "alg none signed": lambda ident: handmade({"alg": "none", "kid": fp_kid()}, claims(ident), b"x")[:-1],
    "HS256 with the cert PEM as key": lambda ident: handmade(
        {"alg": "HS256", "kid": fp_kid(), "typ": "JWT"}, claims(ident), pem(Keys.cert).encode()),
    "HS256 with the public key PEM as key": lambda ident: handmade(
        {"alg": "HS256", "kid": fp_kid(), "typ": "JWT"}, claims(ident),
        Keys.main.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)),
    "HS256 with the cert DER as key": lambda ident: handmade(
        {"alg": "HS256", "kid": fp_kid()}, claims(ident), Keys.cert.public_bytes(serialization.Encoding.DER)),
    "garbage": lambda ident: "not.a.jwt",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_tokens_are_refused(net, cert_setup, case):
    _, ident = cert_setup
    r = ext_login(net.client, REFUSED[case](ident))
    assert_error(r, 401, "INVALID_AUTH")
    assert "cause" not in r.json()["error"]


def test_expiry_follows_the_controller_clock(net, cert_setup):
    _, ident = cert_setup
    token = sign(Keys.main, fp_kid(), claims(ident))        # exp = now + 300
    assert ext_login(net.client, token).status_code == 200
    clock.advance(301)
    assert_error(ext_login(net.client, token), 401, "INVALID_AUTH")


def test_no_bearer_is_refused(net, cert_setup):
    assert_error(ext_login(net.client, None), 401, "INVALID_AUTH")
    r = net.client.post(CLIENT + "/authenticate?method=ext-jwt", headers={"authorization": "Basic eDp5"})
    assert_error(r, 401, "INVALID_AUTH")


def test_second_bearer_may_be_the_good_one(net, cert_setup):
    _, ident = cert_setup
    bad = sign(Keys.other_rsa, fp_kid(), claims(ident))
    good = sign(Keys.main, fp_kid(), claims(ident))
    assert ext_login(net.client, [bad, good]).status_code == 200


def test_disabled_signer_or_identity_is_refused(net, admin, cert_setup):
    signer, ident = cert_setup
    token = sign(Keys.main, fp_kid(), claims(ident))
    admin.post(f"/identities/{ident}/disable", json={"durationMinutes": 0})
    assert_error(ext_login(net.client, token), 401, "INVALID_AUTH")
    admin.post(f"/identities/{ident}/enable")
    assert ext_login(net.client, token).status_code == 200
    assert admin.patch(f"/external-jwt-signers/{signer}", json={"enabled": False}).status_code == 200
    assert_error(ext_login(net.client, token), 401, "INVALID_AUTH")


def test_claims_property_and_external_id(net, admin):
    cert_signer(admin, claimsProperty="email", useExternalId=True)
    ident = net.identity(external_id="jane@example.test")
    good = sign(Keys.main, fp_kid(), claims("ignored", email="jane@example.test"))
    r = ext_login(net.client, good)
    assert r.status_code == 200 and r.json()["data"]["identityId"] == ident
    by_id = sign(Keys.main, fp_kid(), claims(ident, email=ident))      # the id is not an externalId
    assert_error(ext_login(net.client, by_id), 401, "INVALID_AUTH")
    missing = sign(Keys.main, fp_kid(), claims("jane@example.test"))   # no email claim
    assert_error(ext_login(net.client, missing), 401, "INVALID_AUTH")


def test_policy_ext_jwt_allowed_and_signers(net, admin):
    signer = cert_signer(admin)
    other = admin.create("external-jwt-signers", {"name": "other", "enabled": True, "issuer": "https://other.test",
                                                   "audience": AUDIENCE, "jwksEndpoint": "https://127.0.0.1:9/x"})
    def token(ident):
        return sign(Keys.main, fp_kid(), claims(ident))
    off = net.identity(policy=net.policy(primary={"extJwt": {"allowed": False}}))
    assert_error(ext_login(net.client, token(off)), 401, "INVALID_AUTH")
    wrong = net.identity(policy=net.policy(primary={"extJwt": {"allowedSigners": [other]}}))
    assert_error(ext_login(net.client, token(wrong)), 401, "INVALID_AUTH")
    listed = net.identity(policy=net.policy(primary={"extJwt": {"allowedSigners": [other, signer]}}))
    assert ext_login(net.client, token(listed)).status_code == 200


# ---------------------------------------------------------------- primary: JWKS signer
def test_jwks_keys_fetched_cached_and_refreshed_on_unknown_kid(net, admin, jwks):
    jwks.keys = [jwk(Keys.ec1, "k1")]
    jwks_signer(admin, jwks.url)
    ident = net.identity()
    assert ext_login(net.client, sign(Keys.ec1, "k1", claims(ident), "ES256")).status_code == 200
    assert jwks.hits == 1
    assert ext_login(net.client, sign(Keys.ec1, "k1", claims(ident), "ES256")).status_code == 200
    assert jwks.hits == 1                                               # cached
    # the IdP rotates: a new kid makes the controller fetch again
    jwks.keys = [jwk(Keys.ec2, "k2")]
    clock.advance(2)
    assert ext_login(net.client, sign(Keys.ec2, "k2", claims(ident), "ES384")).status_code == 200
    assert jwks.hits == 2
    # old keys are kept
    assert ext_login(net.client, sign(Keys.ec1, "k1", claims(ident), "ES256")).status_code == 200
    assert jwks.hits == 2
    # unknown kids fetch at most once a second
    clock.advance(2)
    for _ in range(3):
        assert_error(ext_login(net.client, sign(Keys.ec1, "k9", claims(ident), "ES256")), 401, "INVALID_AUTH")
    assert jwks.hits == 3
    clock.advance(2)
    assert_error(ext_login(net.client, sign(Keys.ec1, "k9", claims(ident), "ES256")), 401, "INVALID_AUTH")
    assert jwks.hits == 4


def test_jwks_key_types(net, admin, jwks):
    jwks.keys = [jwk(Keys.main, "rsa"), jwk(Keys.ed, "ed"), jwk(Keys.other_rsa, "x5c", x5c=True),
                 {"kty": "oct", "kid": "hmac", "k": b64url(b"shared-secret")}]
    jwks_signer(admin, jwks.url)
    ident = net.identity()
    assert ext_login(net.client, sign(Keys.main, "rsa", claims(ident), "PS256")).status_code == 200
    assert ext_login(net.client, sign(Keys.ed, "ed", claims(ident), "EdDSA")).status_code == 200
    assert ext_login(net.client, sign(Keys.other_rsa, "x5c", claims(ident), "RS512")).status_code == 200
    # symmetric keys in a JWKS are never used, and algorithms must fit the key
    assert_error(ext_login(net.client, handmade({"alg": "HS256", "kid": "hmac"}, claims(ident), b"shared-secret")),
                 401, "INVALID_AUTH")
    assert_error(ext_login(net.client, sign(Keys.ec1, "rsa", claims(ident), "ES256")), 401, "INVALID_AUTH")


def test_jwks_server_not_trusted_without_its_ca(net, admin, jwks, monkeypatch):
    monkeypatch.delenv("ZITI_LITE_JWKS_CA_FILE")
    jwks.keys = [jwk(Keys.ec1, "k1")]
    jwks_signer(admin, jwks.url)
    ident = net.identity()
    assert_error(ext_login(net.client, sign(Keys.ec1, "k1", claims(ident), "ES256")), 401, "INVALID_AUTH")
    assert jwks.hits == 0   # the TLS handshake failed before any request


# ---------------------------------------------------------------- secondary: requireExtJwtSigner
def _bearer(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def required_signer(net, admin):
    signer = cert_signer(admin, externalAuthUrl="https://idp.example.test/auth", clientId="ziti-client",
                         scopes=["openid", "email"])
    policy = net.policy(secondary={"requireExtJwtSigner": signer})
    ident, user = net.user(policy=policy)
    return signer, ident, user


def test_required_signer_jwt_on_every_request(net, required_signer):
    signer, ident, user = required_signer
    query = {"typeId": "EXT-JWT", "provider": "url", "httpUrl": "https://idp.example.test/auth",
             "clientId": "ziti-client", "scopes": ["email", "openid"], "id": signer}   # the set, sorted
    r = net.authenticate(user)
    assert r.json()["data"]["authQueries"] == [query]
    api = net.login(user)
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")
    assert api.get("/current-api-session").json()["data"]["authQueries"] == [query]
    good = sign(Keys.main, fp_kid(), claims(ident))
    assert api.get("/current-identity", headers=_bearer(good)).status_code == 200
    assert api.get("/current-api-session", headers=_bearer(good)).json()["data"]["authQueries"] == []
    # not remembered: the next request without the JWT is partial again
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")
    other = net.identity()
    for bad in (sign(Keys.main, fp_kid(), claims(other)),                       # someone else's JWT
                sign(Keys.other_rsa, fp_kid(), claims(ident)),                 # wrong signature
                sign(Keys.main, fp_kid(), claims(ident, aud="x")),              # wrong audience
                handmade({"alg": "none", "kid": fp_kid()}, claims(ident), None)):
        assert_error(api.get("/current-identity", headers=_bearer(bad)), 401, "UNAUTHORIZED")
    clock.advance(301)                                                          # the JWT expired
    assert_error(api.get("/current-identity", headers=_bearer(good)), 401, "UNAUTHORIZED")


def test_ext_jwt_login_with_the_required_signer_is_complete(net, required_signer):
    _, ident, _ = required_signer
    token = sign(Keys.main, fp_kid(), claims(ident))
    r = ext_login(net.client, token)
    assert r.status_code == 200 and r.json()["data"]["authQueries"] == []
    api_headers = {"zt-session": r.json()["data"]["token"], **_bearer(token)}
    assert net.client.get(CLIENT + "/current-identity", headers=api_headers).status_code == 200


def test_required_jwks_signer_warms_keys(net, admin, jwks):
    jwks.keys = [jwk(Keys.ec1, "k1")]
    signer = jwks_signer(admin, jwks.url)
    ident, user = net.user(policy=net.policy(secondary={"requireExtJwtSigner": signer}))
    api = net.login(user)
    token = sign(Keys.ec1, "k1", claims(ident), "ES256")
    assert api.get("/current-identity", headers=_bearer(token)).status_code == 200
    assert jwks.hits == 1


def test_totp_and_ext_jwt_both_required(net, admin):
    signer = cert_signer(admin)
    policy = net.policy(secondary={"requireTotp": True, "requireExtJwtSigner": signer})
    ident, user = net.user(policy=policy)
    token = sign(Keys.main, fp_kid(), claims(ident))
    api = net.login(user)
    queries = api.get("/current-api-session").json()["data"]["authQueries"]
    assert [q["typeId"] for q in queries] == ["MFA", "EXT-JWT"]
    secret, _ = enroll_totp(api)                         # allowed while partial
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")   # still owes the JWT
    assert api.get("/current-identity", headers=_bearer(token)).status_code == 200
    fresh = net.login(user)
    assert [q["typeId"] for q in fresh.get("/current-api-session", headers=_bearer(token)).json()["data"]
            ["authQueries"]] == ["MFA"]
    fresh.post("/authenticate/mfa", json={"code": code(secret)})
    assert fresh.get("/current-identity", headers=_bearer(token)).status_code == 200


def test_claims_property_is_a_json_pointer(net, admin):
    """OpenZiti 2.0 reads ``claimsProperty`` as a JSON pointer (``sub`` is ``/sub``)."""
    cert_signer(admin, claimsProperty="/ext/ids~1zid")
    ident = net.identity()
    body = claims("someone-else", ext={"ids/zid": ident})
    assert ext_login(net.client, sign(Keys.main, fp_kid(), body)).status_code == 200
    body = claims(ident, ext={"ids/zid": 7})
    assert_error(ext_login(net.client, sign(Keys.main, fp_kid(), body)), 401, "INVALID_AUTH")
