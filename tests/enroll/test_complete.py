"""The client API's /enroll endpoints: content types, Accept-based answers, single use, expiry,
and the bad inputs that must get upstream's codes and change nothing."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.conftest import CLIENT, assert_error
from tests.enroll.conftest import csr, ott_identity
from ziti_lite import clock
from ziti_lite.pki import tokens


def _leaf(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificates(pem.encode())[0]


def _state(admin, iid):
    d = admin.get(f"/identities/{iid}").json()["data"]
    return d["enrollment"], d["authenticators"]


@pytest.mark.parametrize("path", ["/enroll", CLIENT + "/enroll", "/edge/v1/enroll", CLIENT + "/enroll/ott"])
@pytest.mark.parametrize("ctype", ["text/plain", "application/x-pem-file", "application/pkcs10",
                                   "text/plain; charset=utf-8"])
def test_ott_accepts_csr_content_types_on_every_path(admin, anon, keys, path, ctype):
    iid, token = ott_identity(admin, "ct-" + str(abs(hash((path, ctype))))[:8])
    r = anon.client.post(f"{path}?method=ott&token={token}", content=csr(keys[0], iid),
                         headers={"content-type": ctype})
    assert r.status_code == 200, r.text
    enrollment, auths = _state(admin, iid)
    assert "ott" not in enrollment and "cert" in auths


@pytest.mark.parametrize("accept, as_json", [
    (None, False), ("application/x-pem-file", False), ("text/plain", False),
    ("application/json", True), ("*/*", True), ("application/x-pem-file, application/json;q=0.5", True),
])
def test_answer_follows_accept(ctl, admin, anon, keys, accept, as_json):
    iid, token = ott_identity(admin, f"acc-{as_json}-{len(accept or '')}")
    req = anon.client.build_request("POST", f"/enroll?method=ott&token={token}", content=csr(keys[1], iid),
                                    headers={"content-type": "text/plain"})
    del req.headers["accept"]  # the test client's default */*
    if accept:
        req.headers["accept"] = accept
    r = anon.client.send(req)
    assert r.status_code == 200, r.text
    if as_json:
        assert r.headers["content-type"] == "application/json"
        data = r.json()["data"]
        certs = x509.load_pem_x509_certificates(data["cert"].encode())
        assert len(certs) == 2  # leaf + signing CA, root excluded
        assert certs[1].subject == _leaf(ctl.state["signer_cert"]).subject
        assert data["ca"].count("BEGIN CERTIFICATE") == 2
    else:
        assert r.headers["content-type"] == "application/x-pem-file"  # exactly: no charset
        assert r.text.count("BEGIN CERTIFICATE") == 1


def test_issued_certificate_is_upstream_shaped(ctl, admin, anon, keys):
    iid, token = ott_identity(admin, "shape")
    body = csr(keys[2], iid, sans=["dropped.example.com"])
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=body, headers={"content-type": "text/plain"})
    cert = _leaf(r.json()["data"]["cert"])
    signer = _leaf(ctl.state["signer_cert"])
    assert cert.subject.rfc4514_string() == f"CN={iid},O=OpenZiti"
    assert cert.issuer == signer.subject
    cert.verify_directly_issued_by(signer)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert cert.serial_number.bit_length() > 64
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=364) < life < dt.timedelta(days=366)


def test_mbedtls_and_rsa_csrs_are_accepted(admin, anon, keys):
    iid, token = ott_identity(admin, "mbed")
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=csr(keys[3], iid, explicit_null_params=True),
                         headers={"content-type": "text/plain"})
    assert r.status_code == 200, r.text
    iid, token = ott_identity(admin, "rsa-csr")
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=csr(None, iid, key_type="rsa"),
                         headers={"content-type": "application/x-pem-file"})
    assert r.status_code == 200, r.text


def test_jwt_claims_and_signature(ctl, admin):
    iid, token = ott_identity(admin, "jwt")
    jwt = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["jwt"]
    claims = tokens.verify_enrollment_jwt(jwt, ctl.state["server_cert"])
    assert list(claims) == ["iss", "sub", "aud", "exp", "jti", "em", "ctrls"]
    assert claims["jti"] == token and claims["em"] == "ott" and claims["iss"] == ctl.settings.base_url


def test_token_works_once(admin, anon, keys):
    iid, token = ott_identity(admin, "once")
    url = f"/enroll?method=ott&token={token}"
    assert anon.client.post(url, content=csr(keys[0], iid), headers={"content-type": "text/plain"}).status_code == 200
    auths = _state(admin, iid)[1]
    r = anon.client.post(url, content=csr(keys[1], iid), headers={"content-type": "text/plain"})
    assert_error(r, 400, "INVALID_ENROLLMENT_TOKEN")
    assert _state(admin, iid)[1] == auths


@pytest.mark.parametrize("query", ["?method=ott&token=00000000-0000-4000-8000-000000000000", "?method=ott", ""])
def test_unknown_or_missing_token(anon, keys, query):
    r = anon.client.post("/enroll" + query, content=csr(keys[0], "x"), headers={"content-type": "text/plain"})
    assert_error(r, 400, "INVALID_ENROLLMENT_TOKEN")


def test_expired_token_changes_nothing(admin, anon, keys):
    iid, token = ott_identity(admin, "expired")
    clock.advance(181 * 60)
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=csr(keys[0], iid),
                         headers={"content-type": "text/plain"})
    assert_error(r, 400, "ENROLLMENT_EXPIRED")
    clock.reset()
    enrollment, auths = _state(admin, iid)
    assert enrollment["ott"]["token"] == token and auths == {}


@pytest.mark.parametrize("body, ctype", [
    (b"", "text/plain"),
    (b"-----BEGIN CERTIFICATE REQUEST-----\nnot base64 at all!\n-----END CERTIFICATE REQUEST-----\n", "text/plain"),
    (b"\x30\x03\x02\x01\x00", "application/x-pem-file"),
    (b'{"token": "whatever"}', "application/json"),
])
def test_bad_csr_changes_nothing(admin, anon, body, ctype):
    iid, token = ott_identity(admin, "badcsr-" + str(len(body)))
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=body, headers={"content-type": ctype})
    assert_error(r, 400, "COULD_NOT_PROCESS_CSR")
    enrollment, auths = _state(admin, iid)
    assert enrollment["ott"]["token"] == token and auths == {}


def test_tampered_csr_signature_is_refused(admin, anon, keys):
    iid, token = ott_identity(admin, "tampered")
    pem = csr(keys[0], iid).splitlines()
    body = pem[1]
    pem[1] = body[:-4] + ("AAAA" if body[-4:] != "AAAA" else "BBBB")
    r = anon.client.post(f"/enroll?method=ott&token={token}", content="\n".join(pem).encode(),
                         headers={"content-type": "text/plain"})
    assert_error(r, 400, "COULD_NOT_PROCESS_CSR")


def test_unsupported_content_type(admin, anon, keys):
    iid, token = ott_identity(admin, "ctype")
    r = anon.client.post(f"/enroll?method=ott&token={token}", content=csr(keys[0], iid),
                         headers={"content-type": "application/xml"})
    assert_error(r, 400, "INVALID_CONTENT_TYPE")
    assert _state(admin, iid)[0]["ott"]["token"] == token


# ------------------------------------------------------------------ updb
def _updb(admin, name, username):
    iid = admin.create("identities", {"name": name, "type": "User", "isAdmin": False, "enrollment": {"updb": username}})
    return iid, admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["updb"]["token"]


def test_updb_enrollment_sets_the_password(admin, anon):
    iid, token = _updb(admin, "updb-user", "updb-login")
    r = anon.client.post(f"{CLIENT}/enroll/updb?token={token}", json={"password": "Passw0rd!"})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    assert admin.login("updb-login", "Passw0rd!").token
    enrollment, auths = _state(admin, iid)
    assert enrollment == {} and auths["updb"]["username"] == "updb-login"


@pytest.mark.parametrize("body", [{}, {"password": ""}, {"password": "abc"}, {"password": "x" * 101}, {"password": 5}])
def test_updb_bad_password_changes_nothing(admin, anon, body):
    iid, token = _updb(admin, "updb-bad", "updb-bad-login")
    r = anon.client.post(f"/enroll?method=updb&token={token}", json=body)
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    enrollment, auths = _state(admin, iid)
    assert enrollment["updb"]["token"] == token and auths == {}


# ------------------------------------------------------------------ well-known CA bundle
@pytest.mark.parametrize("path", ["/.well-known/est/cacerts", CLIENT + "/.well-known/est/cacerts",
                                  "/edge/management/v1/.well-known/est/cacerts"])
def test_well_known_cacerts(ctl, anon, path):
    r = anon.client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/pkcs7-mime"
    assert r.headers["content-transfer-encoding"] == "base64"
    lines = r.text.split("\n")
    assert all(len(line) == 64 for line in lines[:-1]) and 0 < len(lines[-1]) <= 64
    assert not r.text.endswith("\n")
    certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(r.text))
    subjects = {c.subject for c in certs}
    assert subjects == {_leaf(ctl.state["root_cert"]).subject, _leaf(ctl.state["signer_cert"]).subject}
    # the server certificate's issuer is in the bundle: it is the SDK's only trust anchor
    assert _leaf(ctl.state["server_cert"]).issuer in subjects
