"""Authenticator re-enrollment, the caller's own authenticators (both APIs), certificate
extension errors, and router enrollment errors."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.auth.test_certs import enrolled
from tests.conftest import CLIENT, MGMT, Api, assert_error
from tests.enroll.conftest import csr, issue, make_ca, register_ca
from ziti_lite import clock


def _future(minutes=60) -> str:
    return clock.fmt(clock.now() + dt.timedelta(minutes=minutes))


def _updb_identity(admin, name, username, password="Passw0rd-1"):
    iid = admin.create("identities", {"name": name, "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": username, "password": password})
    return iid


# ------------------------------------------------------------------ re-enroll
def test_reenroll_updb_network_cert_and_ca_cert(certs, cadmin, keys):
    uid = _updb_identity(cadmin, "re-updb", "re-updb-user")
    auth = cadmin.get(f"/identities/{uid}").json()["data"]["authenticators"]["updb"]["id"]
    user = Api(certs.client).login("re-updb-user", "Passw0rd-1")
    r = cadmin.post(f"/authenticators/{auth}/re-enroll", json={"expiresAt": _future()})
    assert r.status_code == 201, r.text
    enr_id = r.json()["data"]["id"]
    assert r.json()["data"]["_links"]["self"]["href"] == f"./enrollments/{enr_id}"
    detail = cadmin.get(f"/identities/{uid}").json()["data"]
    assert detail["authenticators"] == {} and detail["enrollment"]["updb"]["id"] == enr_id
    assert "username" not in cadmin.get(f"/enrollments/{enr_id}").json()["data"]  # upstream's detail has none
    assert_error(user.get("/current-identity"), 401, "UNAUTHORIZED")  # its sessions went with it

    iid, chain = enrolled(certs, cadmin, keys, "re-ott")
    auth = cadmin.get(f"/identities/{iid}").json()["data"]["authenticators"]["cert"]["id"]
    r = cadmin.post(f"/authenticators/{auth}/re-enroll", json={"expiresAt": _future()})
    assert r.status_code == 201
    assert "ott" in cadmin.get(f"/identities/{iid}").json()["data"]["enrollment"]
    assert_error(certs.cert_login(chain), 401, "INVALID_AUTH")

    root = make_ca("Re CA", keys[0])
    ca_id = register_ca(cadmin, root, "re-ca", keys[1])
    leaf = issue(root, "re-ca-dev", keys[2])
    assert certs.present(leaf).post("/enroll?method=ca", json={}).status_code == 200
    found = cadmin.get('/identities?filter=name="re-ca-re-ca-dev"').json()["data"][0]
    r = cadmin.post(f"/authenticators/{found['authenticators']['cert']['id']}/re-enroll", json={"expiresAt": _future()})
    assert r.status_code == 201
    ottca = cadmin.get(f"/identities/{found['id']}").json()["data"]["enrollment"]["ottca"]
    assert ottca["caId"] == ca_id


def test_reenroll_errors(cadmin):
    uid = _updb_identity(cadmin, "re-bad", "re-bad-user")
    auth = cadmin.get(f"/identities/{uid}").json()["data"]["authenticators"]["updb"]["id"]
    assert_error(cadmin.post("/authenticators/missing/re-enroll", json={"expiresAt": _future()}), 404, "NOT_FOUND")
    assert_error(cadmin.post(f"/authenticators/{auth}/re-enroll", json={}), 400, "COULD_NOT_VALIDATE")
    assert_error(cadmin.post(f"/authenticators/{auth}/re-enroll", json={"expiresAt": _future(-5)}),
                 400, "COULD_NOT_VALIDATE")
    assert cadmin.get(f"/identities/{uid}").json()["data"]["authenticators"]["updb"]["id"] == auth


# ------------------------------------------------------------------ the caller's own authenticators
@pytest.mark.parametrize("prefix", [CLIENT, MGMT])
def test_own_authenticators_and_password_change(client, cadmin, prefix):
    uid = _updb_identity(cadmin, "self-" + prefix[6:12], "self-user-" + prefix[6:12])
    other = _updb_identity(cadmin, "other-" + prefix[6:12], "other-user-" + prefix[6:12])
    other_auth = cadmin.get(f"/identities/{other}").json()["data"]["authenticators"]["updb"]["id"]
    me = Api(client, prefix).login("self-user-" + prefix[6:12], "Passw0rd-1")
    listing = me.get("/current-identity/authenticators").json()
    assert listing["meta"]["pagination"]["totalCount"] == 1
    mine = listing["data"][0]
    assert mine["method"] == "updb" and mine["identityId"] == uid
    assert mine["_links"]["self"]["href"] == f"./current-identity/authenticators/{mine['id']}"
    assert "passwordHash" not in mine and "salt" not in mine
    assert me.get(f"/current-identity/authenticators/{mine['id']}").json()["data"]["id"] == mine["id"]
    assert_error(me.get(f"/current-identity/authenticators/{other_auth}"), 404, "NOT_FOUND")

    path = f"/current-identity/authenticators/{mine['id']}"
    err = assert_error(me.patch(path, json={"password": "N3w-password", "currentPassword": "wrong-pass"}),
                       401, "UNAUTHORIZED")
    assert err["cause"]["field"] == "currentPassword"
    assert_error(me.patch(path, json={"password": "N3w-password"}), 400, "COULD_NOT_VALIDATE")
    assert_error(me.patch(f"/current-identity/authenticators/{other_auth}",
                          json={"password": "N3w-password", "currentPassword": "Passw0rd-1"}), 404, "NOT_FOUND")
    assert me.patch(path, json={"password": "N3w-password", "currentPassword": "Passw0rd-1"}).status_code == 200
    assert Api(client, prefix).login("self-user-" + prefix[6:12], "N3w-password").token
    r = me.put(path, json={"username": "renamed-" + prefix[6:12], "password": "Th1rd-pass",
                           "currentPassword": "N3w-password"})
    assert r.status_code == 200, r.text
    assert Api(client, prefix).login("renamed-" + prefix[6:12], "Th1rd-pass").token


def test_own_cert_authenticator_cannot_take_a_password(certs, cadmin, keys):
    iid, chain = enrolled(certs, cadmin, keys, "self-cert")
    token = certs.cert_login(chain).json()["data"]["token"]
    me = Api(certs.client, CLIENT, token)
    mine = me.get("/current-identity/authenticators").json()["data"][0]
    assert mine["method"] == "cert" and mine["isIssuedByNetwork"] is True and mine["certPem"]
    r = me.patch(f"/current-identity/authenticators/{mine['id']}",
                 json={"password": "N3w-password", "currentPassword": "whatever"})
    assert_error(r, 409, "CAN_NOT_UPDATE_AUTHENTICATOR")


# ------------------------------------------------------------------ extension errors
def test_extend_errors(certs, cadmin, keys, ctl):
    iid, chain = enrolled(certs, cadmin, keys, "ext-errors")
    token = certs.cert_login(chain).json()["data"]["token"]
    me = Api(certs.client, CLIENT, token)
    auth = me.get("/current-identity/authenticators").json()["data"][0]["id"]
    path = f"/current-identity/authenticators/{auth}"
    body = {"clientCertCsr": csr(keys[1], iid)}
    assert_error(certs.present().post(CLIENT + path + "/extend", json=body, headers={"zt-session": token}),
                 401, "UNAUTHORIZED")
    _, other_chain = enrolled(certs, cadmin, keys, "ext-other", key=2)
    assert_error(certs.present(other_chain).post(CLIENT + path + "/extend", json=body, headers={"zt-session": token}),
                 401, "UNAUTHORIZED")
    certs.present(chain)
    assert_error(me.post(path + "/extend", json={"clientCertCsr": "junk"}), 400, "COULD_NOT_PROCESS_CSR")
    assert_error(me.post(path + "/extend", json={}), 400, "COULD_NOT_VALIDATE")
    assert_error(me.post("/current-identity/authenticators/missing/extend", json=body), 404, "NOT_FOUND")
    assert_error(me.post(path + "/extend-verify", json={"clientCert": chain}), 409, "CAN_NOT_UPDATE_AUTHENTICATOR")
    r = me.post(path + "/extend", json=body)
    assert r.status_code == 200, r.text
    assert set(r.json()["data"]) == {"clientCert", "ca"}
    assert_error(me.post(path + "/extend-verify", json={"clientCert": chain}), 400, "INVALID_CLIENT_CERT")
    assert_error(me.post(path + "/extend-verify", json={"clientCert": "nope"}), 400, "INVALID_CLIENT_CERT")
    assert certs.cert_login(chain).status_code == 200  # nothing switched

    _updb_identity(cadmin, "ext-updb", "ext-updb-user")
    user = Api(certs.client, CLIENT).login("ext-updb-user", "Passw0rd-1")
    updb = user.get("/current-identity/authenticators").json()["data"][0]["id"]
    assert_error(user.post(f"/current-identity/authenticators/{updb}/extend", json=body),
                 409, "CAN_NOT_UPDATE_AUTHENTICATOR")


def test_extend_of_a_ca_issued_certificate_is_refused(certs, cadmin, keys):
    root = make_ca("Ext CA", keys[0])
    register_ca(cadmin, root, "ext-ca", keys[1])
    leaf = issue(root, "ext-ca-dev", keys[2])
    certs.present(leaf).post("/enroll?method=ca", json={})
    r = certs.cert_login(leaf)
    me = Api(certs.client, CLIENT, r.json()["data"]["token"])
    auth = me.get("/current-identity/authenticators").json()["data"][0]["id"]
    r = me.post(f"/current-identity/authenticators/{auth}/extend", json={"clientCertCsr": csr(keys[3], "x")})
    assert_error(r, 409, "CAN_NOT_UPDATE_AUTHENTICATOR")


# ------------------------------------------------------------------ router enrollment errors
def test_router_enrollment_errors(certs, cadmin, keys):
    rid = cadmin.create("edge-routers", {"name": "er-errors"})
    token = cadmin.get(f"/edge-routers/{rid}").json()["data"]["enrollmentToken"]
    url = f"/enroll?method=erott&token={token}"
    good = {"certCsr": csr(keys[0], rid), "serverCertCsr": csr(keys[1], rid)}
    cases = [
        ({}, "MISSING_OR_INVALID_CSR"),
        ({"certCsr": good["certCsr"]}, "MISSING_OR_INVALID_CSR"),
        ({**good, "serverCertCsr": "garbage"}, "COULD_NOT_PROCESS_CSR"),
        ({**good, "certCsr": csr(keys[0], "not-the-router")}, "EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID"),
    ]
    for body, code in cases:
        assert_error(certs.present().post(url, json=body), 400, code)
    detail = cadmin.get(f"/edge-routers/{rid}").json()["data"]
    assert detail["isVerified"] is False and detail["enrollmentToken"] == token
    clock.advance(181 * 60)
    assert_error(certs.post(url, json=good), 400, "ENROLLMENT_EXPIRED")
    clock.reset()
    r = certs.post(f"{CLIENT}/enroll/erott?token={token}", json=good)
    assert r.status_code == 200, r.text
    assert_error(certs.post(url, json=good), 400, "INVALID_ENROLLMENT_TOKEN")
    # renewing needs the router's own certificate
    renew = {"certCsr": csr(keys[2], rid), "serverCertCsr": csr(keys[3], rid)}
    assert_error(certs.present().post("/enroll/extend/router", json=renew), 401, "UNAUTHORIZED")
    stranger = make_ca("Router Stranger", keys[4])
    assert_error(certs.present(issue(stranger, rid, keys[5])).post("/enroll/extend/router", json=renew),
                 401, "UNAUTHORIZED")
    router_cert = r.json()["data"]["cert"]
    assert_error(certs.present(router_cert).post("/enroll/extend/router", json={"certCsr": renew["certCsr"]}),
                 400, "COULD_NOT_VALIDATE")
    assert certs.present(router_cert).post("/enroll/extend/router", json=renew).status_code == 200


def test_transit_router_enrollment(certs, cadmin, keys):
    rid = cadmin.create("transit-routers", {"name": "tr-enroll"})
    detail = cadmin.get(f"/transit-routers/{rid}").json()["data"]
    r = certs.present().post(f"/enroll?method=trott&token={detail['enrollmentToken']}",
                             json={"certCsr": csr(keys[0], rid), "serverCertCsr": csr(keys[1], rid)})
    assert r.status_code == 200, r.text
    assert cadmin.get(f"/transit-routers/{rid}").json()["data"]["isVerified"] is True


def test_extend_on_another_identitys_authenticator_is_404_like_an_unknown_id(certs, cadmin, keys):
    """No existence oracle: someone else's authenticator answers exactly as a missing one."""
    iid, chain = enrolled(certs, cadmin, keys, "ext-mine")
    other_iid, _ = enrolled(certs, cadmin, keys, "ext-theirs", key=2)
    theirs = cadmin.get(f"/identities/{other_iid}").json()["data"]["authenticators"]["cert"]["id"]
    certs.present(chain)
    me = Api(certs.client, CLIENT, certs.cert_login(chain).json()["data"]["token"])
    body = {"clientCertCsr": csr(keys[1], iid)}
    for op, doc in (("extend", body), ("extend-verify", {"clientCert": chain})):
        unknown = assert_error(me.post(f"/current-identity/authenticators/missing/{op}", json=doc), 404, "NOT_FOUND")
        other = assert_error(me.post(f"/current-identity/authenticators/{theirs}/{op}", json=doc), 404, "NOT_FOUND")
        assert other["message"] == unknown["message"]
        # the body is validated before any lookup (upstream: 400 first)
        assert_error(me.post(f"/current-identity/authenticators/missing/{op}", json={}), 400, "COULD_NOT_VALIDATE")
    # no certificate presented: 401 before any lookup
    assert_error(certs.present().post(CLIENT + "/current-identity/authenticators/missing/extend", json=body,
                                      headers={"zt-session": me.token}), 401, "UNAUTHORIZED")
