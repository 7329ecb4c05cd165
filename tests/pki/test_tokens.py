from __future__ import annotations

import base64
import datetime as dt
import json
import uuid

import jwt
import pytest

from ziti_lite.pki import ca, tokens
from ziti_lite.pki.tokens import TokenError, enrollment_jwt, verify_enrollment_jwt

UTC = dt.UTC


def _seg(token: str, i: int) -> bytes:
    s = token.split(".")[i]
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


@pytest.fixture()
def ott(pki):
    exp = dt.datetime.now(UTC) + dt.timedelta(minutes=180)
    tok = str(uuid.uuid4())
    j = enrollment_jwt(server=pki.server, issuer="https://127.0.0.1:1280", subject="IdEnT.1",
                       token=tok, method="ott", expires_at=exp)
    return j, tok, exp


def test_header_exact(pki, ott):
    j, _, _ = ott
    fp = ca.fingerprint(pki.server.cert_pem)
    assert _seg(j, 0) == json.dumps({"alg": "RS256", "kid": fp, "typ": "JWT"}, separators=(",", ":")).encode()
    assert jwt.get_unverified_header(j) == {"alg": "RS256", "kid": fp, "typ": "JWT"}


def test_claims_exact(pki, ott):
    j, tok, exp = ott
    raw = _seg(j, 1)
    assert raw == (b'{"iss":"https://127.0.0.1:1280","sub":"IdEnT.1","aud":[""],"exp":%d,'
                   b'"jti":"%s","em":"ott","ctrls":null}' % (int(exp.timestamp()), tok.encode()))
    claims = json.loads(raw)
    assert list(claims) == ["iss", "sub", "aud", "exp", "jti", "em", "ctrls"]
    assert "iat" not in claims and "nbf" not in claims


def test_verifies_against_server_cert(pki, ott):
    j, tok, exp = ott
    claims = verify_enrollment_jwt(j, pki.server.cert_pem)
    assert claims["jti"] == tok and claims["em"] == "ott" and claims["aud"] == [""]
    assert claims["exp"] == int(exp.timestamp())
    # what an SDK does: verify with the public key of the leaf the server presents
    decoded = jwt.decode(j, pki.server.cert.public_key(), algorithms=["RS256"], options={"verify_aud": False})
    assert decoded == claims


def test_refused_with_other_cert_or_tampering(pki, ott):
    j, _, _ = ott
    other = ca.issue_server_cert(pki.signer, ["127.0.0.1"])  # new RSA key
    with pytest.raises(TokenError):
        verify_enrollment_jwt(j, other.cert_pem)
    with pytest.raises(TokenError):  # EC certificate: alg mismatch
        verify_enrollment_jwt(j, pki.signer.cert_pem)
    # same key, re-issued certificate: signature fine but kid is not that cert's fingerprint
    same_key = ca.issue_server_cert(pki.signer, ["127.0.0.1"], key_pem=pki.server.key_pem)
    with pytest.raises(TokenError, match="kid"):
        verify_enrollment_jwt(j, same_key.cert_pem)
    h, p, s = j.split(".")
    claims = json.loads(_seg(j, 1))
    claims["sub"] = "someone-else"
    p2 = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
    with pytest.raises(TokenError):
        verify_enrollment_jwt(f"{h}.{p2}.{s}", pki.server.cert_pem)
    with pytest.raises(TokenError):
        verify_enrollment_jwt("not.a.jwt", pki.server.cert_pem)


def test_expiry(pki):
    past = dt.datetime.now(UTC) - dt.timedelta(minutes=1)
    j = enrollment_jwt(server=pki.server, issuer="https://h:1", subject="s", token="t",
                       method="updb", expires_at=past)
    with pytest.raises(TokenError, match="expired"):
        verify_enrollment_jwt(j, pki.server.cert_pem)
    assert verify_enrollment_jwt(j, pki.server.cert_pem, check_exp=False)["em"] == "updb"
    assert verify_enrollment_jwt(j, pki.server.cert_pem, at=past - dt.timedelta(seconds=5))["sub"] == "s"


def test_ctrls_and_naive_expiry(pki):
    naive = dt.datetime(2030, 1, 2, 3, 4, 5, 999000)
    j = enrollment_jwt(server=pki.server, issuer="https://h:1280", subject="router1", token="t",
                       method="erott", expires_at=naive, ctrls=["https://a:1280", "https://b:1280"])
    claims = json.loads(_seg(j, 1))
    assert claims["exp"] == int(naive.replace(tzinfo=UTC).timestamp())  # truncated, UTC
    assert claims["ctrls"] == ["https://a:1280", "https://b:1280"]
    assert claims["em"] == "erott"


def test_ec_server_key_uses_es256(pki):
    j = tokens.sign_jwt(pki.signer, {"sub": "x"})  # the signer has an EC P-256 key
    assert jwt.get_unverified_header(j)["alg"] == "ES256"
    assert verify_enrollment_jwt(j, pki.signer.cert_pem) == {"sub": "x"}


def test_network_and_ca_jwts(pki):
    n = tokens.network_jwt(server=pki.server, issuer="https://ctrl:1280")
    c = json.loads(_seg(n, 1))
    assert list(c) == ["iss", "sub", "aud", "jti", "em", "ctrls"]
    assert c["iss"] == c["sub"] == "https://ctrl:1280/"
    assert c["aud"] == ["openziti-enroller"] and c["em"] == "network" and c["ctrls"] is None
    uuid.UUID(c["jti"])
    verify_enrollment_jwt(n, pki.server.cert_pem)
    a = tokens.ca_enrollment_jwt(server=pki.server, issuer="https://ctrl:1280/", ca_id="ca1")
    c = json.loads(_seg(a, 1))
    assert c == {"iss": "https://ctrl:1280/", "sub": "ca1", "aud": ["openziti-enroller"], "jti": "ca1",
                 "em": "ca", "ctrls": None}
