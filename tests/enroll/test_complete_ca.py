"""CA verification and JWT, auto CA enrollment and OTT-CA enrollment."""

from __future__ import annotations

import datetime as dt

from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.conftest import CLIENT, assert_error
from tests.enroll.conftest import csr, issue, make_ca, register_ca
from ziti_lite.pki import tokens


def _verify(admin, ca_id, body: str | bytes):
    return admin.post(f"/cas/{ca_id}/verify", content=body, headers={"content-type": "text/plain"})


def test_verify_errors_change_nothing(cadmin, keys):
    root = make_ca("Verify CA", keys[0])
    other = make_ca("Other CA", keys[1])
    ca_id = register_ca(cadmin, root, "verify-ca", keys[2], verify=False)
    token = cadmin.get(f"/cas/{ca_id}").json()["data"]["verificationToken"]
    bad = [
        (b"", "COULD_NOT_PARSE_BODY"),
        (b"not a pem at all", "COULD_NOT_PARSE_BODY"),
        (csr(keys[3], token).encode(), "EXPECTED_PEM_CERTIFICATE"),
        (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "COULD_NOT_PARSE_DER_BLOCK"),
        (issue(root, "not-the-token", keys[3], eku=()).encode(), "INVALID_COMMON_NAME"),
        (issue(other, token, keys[3], eku=()).encode(), "CERTIFICATE_FAILED_VALIDATION"),
    ]
    for body, code in bad:
        assert_error(_verify(cadmin, ca_id, body), 400, code)
        assert cadmin.get(f"/cas/{ca_id}").json()["data"]["isVerified"] is False
    assert _verify(cadmin, ca_id, issue(root, token, keys[3], eku=())).status_code == 200
    detail = cadmin.get(f"/cas/{ca_id}").json()["data"]
    assert detail["isVerified"] is True and detail["verificationToken"] == token
    rows = cadmin.as_prefix("").get("/ziti-lite/v1/audit", params={"filter": 'operation = "verifyCa"'}).json()["data"]
    assert [(r["entityType"], r["entityId"]) for r in rows] == [("cas", ca_id)]   # one row, for the CA
    assert rows[0]["changes"]["isVerified"] == {"old": False, "new": True}
    assert_error(_verify(cadmin, ca_id, issue(root, token, keys[3], eku=())), 409, "CA_ALREADY_VERIFIED")
    assert_error(_verify(cadmin, "missing", issue(root, token, keys[3])), 404, "NOT_FOUND")


def test_ca_jwt(ctl, cadmin, anon, keys):
    root = make_ca("JWT CA", keys[0])
    ca_id = register_ca(cadmin, root, "jwt-ca", keys[1], verify=False)
    r = cadmin.get(f"/cas/{ca_id}/jwt")
    assert r.status_code == 200 and r.headers["content-type"] == "application/jwt"
    claims = tokens.verify_enrollment_jwt(r.text, ctl.state["server_cert"])
    assert claims == {"iss": ctl.settings.base_url + "/", "sub": ca_id, "aud": ["openziti-enroller"], "jti": ca_id,
                      "em": "ca", "ctrls": None}
    assert_error(cadmin.get("/cas/missing/jwt"), 404, "NOT_FOUND")
    assert_error(anon.get(f"/cas/{ca_id}/jwt"), 401, "UNAUTHORIZED")


def test_auto_enrollment_errors(certs, cadmin, keys):
    root = make_ca("Auto CA", keys[0])
    leaf = issue(root, "dev", keys[1])
    assert_error(certs.present(leaf).post("/enroll?method=ca", json={}), 400, "ENROLLMENT_NO_VALID_CAS")
    ca_id = register_ca(cadmin, root, "auto-ca", keys[2], verify=False)
    assert_error(certs.present(leaf).post("/enroll?method=ca", json={}), 400, "CERT_FAILED_VALIDATION")
    assert_error(certs.present().post("/enroll?method=ca", json={}), 400, "CERT_FAILED_VALIDATION")
    token = cadmin.get(f"/cas/{ca_id}").json()["data"]["verificationToken"]
    assert _verify(cadmin, ca_id, issue(root, token, keys[3], eku=())).status_code == 200
    expired = issue(root, "old", keys[1], not_before=dt.datetime.now(dt.UTC) - dt.timedelta(days=40), days=10)
    server_only = issue(root, "srv", keys[1], eku=(ExtendedKeyUsageOID.SERVER_AUTH,))
    for cert in (expired, server_only):
        assert_error(certs.present(cert).post("/enroll?method=ca", json={}), 400, "CERT_FAILED_VALIDATION")
    count = len(cadmin.get("/identities?limit=500").json()["data"])
    assert certs.present(leaf).post("/enroll/ca", json={}).status_code == 200
    assert_error(certs.present(leaf).post("/enroll?method=ca", json={}), 409, "CERT_IN_USE")
    assert len(cadmin.get("/identities?limit=500").json()["data"]) == count + 1
    cadmin.patch(f"/cas/{ca_id}", json={"isAutoCaEnrollmentEnabled": False})
    assert_error(certs.present(issue(root, "later", keys[4])).post("/enroll?method=ca", json={}),
                 400, "CERT_FAILED_VALIDATION")


def test_identity_name_format_and_collisions(certs, cadmin, keys):
    root = make_ca("Names CA", keys[0])
    register_ca(cadmin, root, "names", keys[1], identityNameFormat="[requestedName]@[caName]")
    for key, expected in ((2, "gizmo@names"), (3, "gizmo@names000001"), (4, "gizmo@names000001000002")):
        r = certs.present(issue(root, f"cn{key}", keys[key])).post(
            CLIENT + "/enroll?method=ca", json={"name": "gizmo"})
        assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
        found = cadmin.get(f'/identities?filter=name="{expected}"').json()["data"]
        assert len(found) == 1, expected
        assert found[0]["authenticators"]["cert"]["fingerprint"]
        assert found[0]["isAdmin"] is False and found[0]["roleAttributes"] == ["from-ca"]


def _ottca_identity(admin, name, ca_id):
    iid = admin.create("identities", {"name": name, "type": "Device", "isAdmin": False,
                                      "enrollment": {"ottca": ca_id}})
    e = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ottca"]
    assert e["caId"] == ca_id and e["ca"]["id"] == ca_id
    return iid, e["token"], e["jwt"]


def test_ottca_enrollment(ctl, certs, cadmin, keys):
    root = make_ca("OttCa CA", keys[0])
    other = make_ca("OttCa Other", keys[1])
    ca_id = register_ca(cadmin, root, "ottca-ca", keys[2], verify=False)
    iid, token, jwt = _ottca_identity(cadmin, "ottca-dev", ca_id)
    assert tokens.verify_enrollment_jwt(jwt, ctl.state["server_cert"])["em"] == "ottca"
    leaf = issue(root, "ottca-dev", keys[3])
    url = f"/enroll?method=ottca&token={token}"
    assert_error(certs.present(leaf).post(url, json={}), 400, "ENROLLMENT_CA_NOT_VALID")  # unverified
    ca_token = cadmin.get(f"/cas/{ca_id}").json()["data"]["verificationToken"]
    assert _verify(cadmin, ca_id, issue(root, ca_token, keys[4], eku=())).status_code == 200
    cadmin.patch(f"/cas/{ca_id}", json={"isOttCaEnrollmentEnabled": False})
    assert_error(certs.present(leaf).post(url, json={}), 400, "ENROLLMENT_CA_NOT_VALID")
    cadmin.patch(f"/cas/{ca_id}", json={"isOttCaEnrollmentEnabled": True})
    assert_error(certs.present(issue(other, "x", keys[3])).post(url, json={}), 400, "CERT_FAILED_VALIDATION")
    assert_error(certs.present().post(url, json={}), 400, "CERT_FAILED_VALIDATION")
    assert cadmin.get(f"/identities/{iid}").json()["data"]["authenticators"] == {}

    r = certs.present(leaf).post(url, content=b"", headers={"content-type": "text/plain"})  # Go SDK style
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    detail = cadmin.get(f"/identities/{iid}").json()["data"]
    assert detail["enrollment"] == {} and "cert" in detail["authenticators"]
    r = certs.cert_login(leaf)
    assert r.status_code == 200 and r.json()["data"]["identityId"] == iid

    # the same certificate cannot enroll a second identity
    iid2, token2, _ = _ottca_identity(cadmin, "ottca-dev2", ca_id)
    r = certs.present(leaf).post(f"/enroll?method=ottca&token={token2}", json={})
    err = assert_error(r, 409, "CERT_IN_USE")
    assert err["cause"]["fingerprint"]


def test_ottca_for_unknown_ca_is_not_found(cadmin, keys):
    r = cadmin.post("/identities", json={"name": "no-ca", "type": "Device", "isAdmin": False,
                                        "enrollment": {"ottca": "missing"}})
    assert_error(r, 404, "NOT_FOUND")
    assert cadmin.get('/identities?filter=name="no-ca"').json()["data"] == []  # nothing was created
