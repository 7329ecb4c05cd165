"""End to end over real TLS: a uvicorn-served ziti-lite on a loopback port, clients doing what
the SDKs do (verify the enrollment JWT against the presented server certificate, send a CSR,
log in with the issued certificate in the TLS handshake)."""

from __future__ import annotations

import datetime as dt
import ssl

import pytest
from cryptography import x509

from tests.conftest import CLIENT
from tests.enroll.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    csr,
    fingerprint,
    issue,
    make_ca,
    ott_identity,
    register_ca,
)
from ziti_lite.pki import tokens

pytestmark = pytest.mark.slow   # a live server over TLS


def _server_leaf(live) -> str:
    return ssl.get_server_certificate(("127.0.0.1", live.port))


def test_ott_enroll_then_cert_login(live, keys):
    admin = live.admin()
    iid = admin.create("identities", {"name": "live-ott", "type": "Device", "isAdmin": False,
                                      "enrollment": {"ott": True}})
    jwt = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["jwt"]

    # the client checks the JWT against the certificate the issuer presents
    claims = tokens.verify_enrollment_jwt(jwt, _server_leaf(live))
    assert claims["iss"] == live.url and claims["sub"] == iid and claims["em"] == "ott"
    assert claims["aud"] == [""] and claims["ctrls"] is None

    # C SDK style: text/plain CSR, Accept JSON, unprefixed path from the JWT issuer
    anon = live.client()
    r = anon.post(f"{claims['iss']}/enroll?method=ott&token={claims['jti']}", content=csr(keys[0], iid),
                  headers={"content-type": "text/plain", "accept": "application/json"})
    assert r.status_code == 200, r.text
    chain = r.json()["data"]["cert"]
    leaf_pem = chain.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    assert x509.load_pem_x509_certificate(leaf_pem.encode()).subject.rfc4514_string() == f"CN={iid},O=OpenZiti"

    # the token worked once
    again = anon.post(f"/enroll?method=ott&token={claims['jti']}", content=csr(keys[0], iid),
                      headers={"content-type": "text/plain"})
    assert again.status_code == 400 and again.json()["error"]["code"] == "INVALID_ENROLLMENT_TOKEN"

    client, r = live.cert_login(chain, keys[0])
    assert r.status_code == 200, r.text
    session = r.json()["data"]
    assert session["identityId"] == iid and session["isCertExtendable"] is True
    me = client.get(CLIENT + "/current-identity", headers={"zt-session": r.headers["zt-session"]})
    assert me.status_code == 200 and me.json()["data"]["id"] == iid
    # unprefixed too (C SDK before /version answered), presenting the leaf only
    client2, r2 = live.cert_login(leaf_pem, keys[0], prefix="")
    assert r2.status_code == 200 and r2.json()["data"]["identityId"] == iid

    detail = admin.get(f"/identities/{iid}").json()["data"]
    assert detail["enrollment"] == {} and detail["authenticators"]["cert"]["fingerprint"] == fingerprint(leaf_pem)


def test_go_sdk_style_enroll_gets_bare_pem(live, keys):
    admin = live.admin()
    iid = admin.create("identities", {"name": "live-go", "type": "Device", "isAdmin": False,
                                      "enrollment": {"ott": True}})
    jwt = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["jwt"]
    claims = tokens.verify_enrollment_jwt(jwt, _server_leaf(live))
    go = live.client()
    del go.headers["accept"]  # the Go SDK sends no Accept header
    r = go.post(f"{claims['iss']}/edge/client/v1/enroll?method=ott&token={claims['jti']}",
                content=csr(keys[1], iid), headers={"content-type": "application/x-pem-file"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-pem-file"
    assert r.text.count("BEGIN CERTIFICATE") == 1
    _, login = live.cert_login(r.text, keys[1])
    assert login.status_code == 200 and login.json()["data"]["identityId"] == iid


def test_updb_enrollment(live):
    admin = live.admin()
    iid = admin.create("identities", {"name": "live-updb", "type": "User", "isAdmin": False,
                                      "enrollment": {"updb": "live-user"}})
    enrollment = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["updb"]
    claims = tokens.verify_enrollment_jwt(enrollment["jwt"], _server_leaf(live))
    assert claims["em"] == "updb" and claims["jti"] == enrollment["token"]
    anon = live.client()
    r = anon.post(f"/edge/client/v1/enroll?method=updb&token={claims['jti']}",
                  json={"username": "ignored", "password": "s3cret-Pass"})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    r = anon.post(CLIENT + "/authenticate?method=password", json={"username": "live-user", "password": "s3cret-Pass"})
    assert r.status_code == 200 and r.json()["data"]["identityId"] == iid
    r = anon.post(f"/enroll?method=updb&token={claims['jti']}", json={"password": "other-pass"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_ENROLLMENT_TOKEN"


def test_external_ca_verify_auto_enroll_and_login(live, keys):
    admin = live.admin()
    root = make_ca("Live External Root", keys[2])
    inter = make_ca("Live External Issuing", keys[3], issuer=root, path_length=0)
    ca_id = register_ca(admin, root, "live-ext", keys[4])
    assert admin.get(f"/cas/{ca_id}").json()["data"]["isVerified"] is True

    r = admin.get(f"/cas/{ca_id}/jwt")
    assert r.status_code == 200 and r.headers["content-type"] == "application/jwt"
    claims = tokens.verify_enrollment_jwt(r.text, _server_leaf(live))
    assert claims["em"] == "ca" and claims["sub"] == ca_id and claims["iss"] == live.url + "/"

    # a device certificate from the issuing CA under the registered root, chain sent by the client
    leaf = issue(inter, "sensor-7", keys[5])
    device = live.client(leaf + inter.cert_pem, keys[5])
    r = device.post("/edge/client/v1/enroll?method=ca", json={"name": "ignored by the default format"})
    assert r.status_code == 200, r.text
    found = admin.get('/identities?filter=name="live-ext-sensor-7"').json()["data"]
    assert len(found) == 1 and found[0]["roleAttributes"] == ["from-ca"]

    r = device.post(CLIENT + "/authenticate?method=cert", json={})
    assert r.status_code == 200, r.text
    token = r.json()["data"]["token"]
    me = device.get(CLIENT + "/current-identity", headers={"zt-session": token})
    assert me.json()["data"]["name"] == "live-ext-sensor-7"

    # deleting the CA takes effect at once: its certificates no longer authenticate
    assert admin.delete(f"/cas/{ca_id}").status_code == 200
    _, r = live.cert_login(leaf + inter.cert_pem, keys[5])
    assert r.status_code == 401 and r.json()["error"]["code"] == "INVALID_AUTH"


def test_unverified_ca_is_refused_without_restart(live, keys):
    admin = live.admin()
    root = make_ca("Live Unverified Root", keys[0])
    ca_id = register_ca(admin, root, "live-unverified", keys[1], verify=False)
    leaf = issue(root, "gadget", keys[2])
    device = live.client(leaf, keys[2])
    r = device.post("/enroll?method=ca", content=b"", headers={"content-type": "text/plain"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "CERT_FAILED_VALIDATION"
    r = device.post(CLIENT + "/authenticate?method=cert", json={})
    assert r.status_code == 401 and r.json()["error"]["code"] == "INVALID_AUTH"
    # verify it through the API: the same running server now enrolls and authenticates it
    token = admin.get(f"/cas/{ca_id}").json()["data"]["verificationToken"]
    r = admin.post(f"/cas/{ca_id}/verify", content=issue(root, token, keys[3], eku=()),
                   headers={"content-type": "text/plain"})
    assert r.status_code == 200, r.text
    assert device.post("/enroll?method=ca", content=b"", headers={"content-type": "text/plain"}).status_code == 200
    r = device.post(CLIENT + "/authenticate?method=cert", json={})
    assert r.status_code == 200 and r.json()["data"]["identity"]["name"] == "live-unverified-gadget"


def test_router_enrollment_extension_and_reenroll(live, keys):
    admin = live.admin()
    rid = admin.create("edge-routers", {"name": "live-er", "isTunnelerEnabled": False})
    detail = admin.get(f"/edge-routers/{rid}").json()["data"]
    claims = tokens.verify_enrollment_jwt(detail["enrollmentJwt"], _server_leaf(live))
    assert claims["em"] == "erott" and claims["sub"] == rid and detail["isVerified"] is False

    body = {"certCsr": csr(keys[0], rid), "serverCertCsr": csr(keys[1], rid, sans=["router.example.com", "10.0.0.5"])}
    r = live.client().post(f"/edge/client/v1/enroll?method=erott&token={claims['jti']}", json=body)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert set(data) == {"cert", "serverCert", "ca"}
    server = x509.load_pem_x509_certificate(data["serverCert"].encode())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "router.example.com" in sans.get_values_for_type(x509.DNSName)
    detail = admin.get(f"/edge-routers/{rid}").json()["data"]
    assert detail["isVerified"] is True and detail["fingerprint"] == fingerprint(data["cert"])
    assert "enrollmentJwt" not in detail

    # the router renews its certificates over mutual TLS with its current client certificate
    router = live.client(data["cert"], keys[0])
    r = router.post("/edge/client/v1/enroll/extend/router",
                    json={"certCsr": csr(keys[2], rid), "serverCertCsr": csr(keys[3], rid)})
    assert r.status_code == 200, r.text
    renewed = r.json()["data"]
    assert admin.get(f"/edge-routers/{rid}").json()["data"]["fingerprint"] == fingerprint(renewed["cert"])

    r = admin.post(f"/edge-routers/{rid}/re-enroll")
    assert r.status_code == 200
    detail = admin.get(f"/edge-routers/{rid}").json()["data"]
    assert detail["isVerified"] is False and detail["enrollmentJwt"]


def test_extend_then_verify_switches_certificates(live, keys):
    admin = live.admin()
    iid, token = ott_identity(admin, "live-extend")
    r = live.client().post(f"/enroll?method=ott&token={token}", content=csr(keys[0], iid),
                           headers={"content-type": "text/plain"})
    old = r.json()["data"]["cert"]  # httpx sends Accept: */* → JSON with the chain
    client, r = live.cert_login(old, keys[0])
    session = r.headers["zt-session"]
    auths = client.get(CLIENT + "/current-identity/authenticators", headers={"zt-session": session}).json()["data"]
    auth_id = next(a["id"] for a in auths if a["method"] == "cert")

    r = client.post(CLIENT + f"/current-identity/authenticators/{auth_id}/extend",
                    json={"clientCertCsr": csr(keys[1], iid)}, headers={"zt-session": session})
    assert r.status_code == 200, r.text
    new_chain = r.json()["data"]["clientCert"]
    assert "BEGIN CERTIFICATE" in r.json()["data"]["ca"]
    # until verified, the old certificate keeps working and the new one does not
    assert live.cert_login(old, keys[0])[1].status_code == 200
    assert live.cert_login(new_chain, keys[1])[1].status_code == 401

    r = client.post(CLIENT + f"/current-identity/authenticators/{auth_id}/extend-verify",
                    json={"clientCert": new_chain}, headers={"zt-session": session})
    assert r.status_code == 200, r.text
    _, r = live.cert_login(new_chain, keys[1])
    assert r.status_code == 200 and r.json()["data"]["identityId"] == iid
    assert live.cert_login(old, keys[0])[1].status_code == 401


def test_expired_certificate_passes_the_handshake_and_the_default_policy(live, keys):
    from tests.pki.conftest import make_ca as dated_ca
    admin = live.admin()
    now = dt.datetime.now(dt.UTC)
    root = dated_ca("Live Dated Root", not_before=now - dt.timedelta(days=60), days=365)
    register_ca(admin, root, "live-dated", keys[0])
    iid = admin.create("identities", {"name": "live-expired", "type": "Device", "isAdmin": False})
    old = issue(root, "old", keys[1], not_before=now - dt.timedelta(days=40), days=10)
    assert admin.post("/authenticators", json={"method": "cert", "identityId": iid, "certPem": old}).status_code == 201
    _, r = live.cert_login(old, keys[1])
    assert r.status_code == 200 and r.json()["data"]["identityId"] == iid


def test_certificate_from_an_unregistered_ca_passes_the_handshake_and_gets_401(live, keys):
    # a CA that may enroll exists (alone, with none, the answer is ENROLLMENT_NO_VALID_CAS): the
    # test then holds whichever tests of this module ran before it on the same server
    register_ca(live.admin(), make_ca("Live Known", keys[0]), "live-known", keys[0])
    stranger = make_ca("Live Stranger", keys[0])
    intruder = live.client(issue(stranger, "intruder", keys[1]), keys[1])
    r = intruder.post(CLIENT + "/authenticate?method=cert", json={})
    assert r.status_code == 401 and r.json()["error"]["code"] == "INVALID_AUTH"
    r = intruder.post("/enroll?method=ca", content=b"", headers={"content-type": "text/plain"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "CERT_FAILED_VALIDATION"
    # the connection is usable for everything a certificate is not needed for
    assert intruder.get("/version").status_code == 200
    assert intruder.post(CLIENT + "/authenticate?method=password",
                         json={"username": ADMIN_USER, "password": ADMIN_PASSWORD}).status_code == 200
    # a self-signed leaf is no better
    selfie = make_ca("Live Self", keys[2])
    r = live.client(selfie.cert_pem, keys[2]).post(CLIENT + "/authenticate?method=cert", json={})
    assert r.status_code == 401 and r.json()["error"]["code"] == "INVALID_AUTH"
    listed = live.admin().get("/identities?filter=name contains \"intruder\"").json()
    assert listed["meta"]["pagination"]["totalCount"] == 0
