"""Certificate extension on request (OpenZiti 2.0): an admin flags a certificate authenticator
(``POST /authenticators/{id}/request-extend``), the identity's API sessions show it, the SDK's
extend and extend-verify fulfil it; and what a cert login records of the chain the client sent
(``improperClientCertChain``, ``lastAuthResolvedToRoot``). False booleans are absent, as upstream's."""

from __future__ import annotations

import secrets
import urllib.parse

import jwt

from tests.auth.test_certs import enrolled
from tests.conftest import CLIENT, MGMT, Api, assert_error
from tests.enroll.conftest import csr, fingerprint
from tests.oidc.test_provider import REDIRECT, bearer, challenge, tokens_for
from tests.oidc.test_provider_steps import finish

FLAGS = ("isExtendRequested", "isKeyRollRequested", "extendRequestedAt", "lastExtendRolledKeys")


def _leaf(chain: str) -> str:
    return chain.split("-----END CERTIFICATE-----\n")[0] + "-----END CERTIFICATE-----\n"


def _cert_auth(admin, iid: str) -> dict:
    auth_id = admin.get(f"/identities/{iid}").json()["data"]["authenticators"]["cert"]["id"]
    return admin.get(f"/authenticators/{auth_id}").json()["data"]


def test_request_extend_flags_the_authenticator_and_the_sessions(certs, cadmin, keys):
    iid, chain = enrolled(certs, cadmin, keys, "rx-flags")
    auth = _cert_auth(cadmin, iid)
    assert not any(k in auth for k in FLAGS), auth       # nothing requested yet: all absent
    r = certs.cert_login(chain)
    token = r.json()["data"]["token"]
    assert "isCertExtendRequested" not in r.json()["data"]
    assert "ziti-authenticator-extend-requested" not in r.headers

    r = cadmin.post(f"/authenticators/{auth['id']}/request-extend", json={"rollKeys": False})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}, r.text
    auth = _cert_auth(cadmin, iid)
    assert auth["isExtendRequested"] is True and auth["extendRequestedAt"]
    assert "isKeyRollRequested" not in auth
    # an API session made before the request shows it too (read from the authenticator)
    me = Api(certs.client, CLIENT, token)
    current = me.get("/current-api-session").json()["data"]
    assert current["isCertExtendRequested"] is True and "isCertKeyRollRequested" not in current
    listed = cadmin.get(f'/api-sessions?filter=identity="{iid}"').json()["data"][0]
    assert listed["isCertExtendRequested"] is True

    assert cadmin.post(f"/authenticators/{auth['id']}/request-extend", json={"rollKeys": True}).status_code == 200
    auth = _cert_auth(cadmin, iid)
    assert auth["isExtendRequested"] is True and auth["isKeyRollRequested"] is True
    r = certs.cert_login(chain, prefix=MGMT)
    s = r.json()["data"]
    assert s["isCertExtendRequested"] is True and s["isCertKeyRollRequested"] is True
    assert r.headers.get_list("ziti-authenticator-extend-requested") == ["true", "true"]


def test_extend_and_verify_fulfil_the_request(certs, cadmin, keys):
    iid, chain = enrolled(certs, cadmin, keys, "rx-fulfil")
    auth_id = _cert_auth(cadmin, iid)["id"]
    assert cadmin.post(f"/authenticators/{auth_id}/request-extend", json={"rollKeys": True}).status_code == 200
    requested_at = _cert_auth(cadmin, iid)["extendRequestedAt"]
    me = Api(certs.client, CLIENT, certs.cert_login(chain).json()["data"]["token"])
    # a new key, as asked
    r = me.post(f"/current-identity/authenticators/{auth_id}/extend", json={"clientCertCsr": csr(keys[1], iid)})
    assert r.status_code == 200, r.text
    new_chain = r.json()["data"]["clientCert"]
    assert _cert_auth(cadmin, iid)["isExtendRequested"] is True      # not until verified
    r = me.post(f"/current-identity/authenticators/{auth_id}/extend-verify", json={"clientCert": new_chain})
    assert r.status_code == 200, r.text
    auth = _cert_auth(cadmin, iid)
    assert "isExtendRequested" not in auth and "isKeyRollRequested" not in auth
    assert auth["extendRequestedAt"] == requested_at                  # stays set
    assert auth["lastExtendRolledKeys"] is True                       # ziti-lite returns it (a difference)
    assert auth["fingerprint"] == fingerprint(_leaf(new_chain))
    assert "isCertExtendRequested" not in me.get("/current-api-session").json()["data"]
    assert_error(certs.cert_login(chain), 401, "INVALID_AUTH")
    # extended again with the same key: no roll
    me = Api(certs.client, CLIENT, certs.cert_login(new_chain).json()["data"]["token"])
    r = me.post(f"/current-identity/authenticators/{auth_id}/extend", json={"clientCertCsr": csr(keys[1], iid)})
    again = r.json()["data"]["clientCert"]
    assert me.post(f"/current-identity/authenticators/{auth_id}/extend-verify",
                   json={"clientCert": again}).status_code == 200
    assert "lastExtendRolledKeys" not in _cert_auth(cadmin, iid)


def test_request_extend_refusals(certs, cadmin, keys, client):
    assert_error(cadmin.post("/authenticators/missing/request-extend", json={"rollKeys": False}), 404, "NOT_FOUND")
    uid = cadmin.create("identities", {"name": "rx-updb", "type": "User", "isAdmin": False})
    updb = cadmin.create("authenticators", {"method": "updb", "identityId": uid, "username": "rx-user",
                                            "password": "Passw0rd-1"})
    err = assert_error(cadmin.post(f"/authenticators/{updb}/request-extend", json={}), 401, "UNAUTHORIZED")
    assert err["cause"]["message"] == "authenticator is not a certificate authenticator"
    iid, _ = enrolled(certs, cadmin, keys, "rx-refused")
    auth_id = _cert_auth(cadmin, iid)["id"]
    user = Api(certs.client, MGMT).login("rx-user", "Passw0rd-1")     # no permission on authenticators
    assert_error(user.post(f"/authenticators/{auth_id}/request-extend", json={"rollKeys": True}), 401, "UNAUTHORIZED")
    assert_error(Api(certs.client, MGMT).post(f"/authenticators/{auth_id}/request-extend", json={}),
                 401, "UNAUTHORIZED")
    assert_error(cadmin.post(f"/authenticators/{auth_id}/request-extend", json={"rollKeys": "yes"}),
                 400, "COULD_NOT_PARSE_BODY")
    assert "isExtendRequested" not in _cert_auth(cadmin, iid)
    # a management operation only
    assert Api(certs.client, CLIENT, cadmin.token).post(f"/authenticators/{auth_id}/request-extend",
                                                       json={}).status_code == 404


def test_a_leaf_sent_alone_is_an_improper_chain(certs, cadmin, keys, ctl):
    iid, chain = enrolled(certs, cadmin, keys, "rx-chain")
    leaf = _leaf(chain)
    r = certs.cert_login(leaf)
    assert r.json()["data"]["improperClientCertChain"] is True
    assert "lastAuthResolvedToRoot" not in _cert_auth(cadmin, iid)
    token = r.json()["data"]["token"]
    assert Api(certs.client, CLIENT, token).get("/current-api-session").json()["data"]["improperClientCertChain"]
    r = certs.cert_login(leaf, ctl.state["signer_cert"])
    assert "improperClientCertChain" not in r.json()["data"]
    assert _cert_auth(cadmin, iid)["lastAuthResolvedToRoot"] is True
    certs.cert_login(leaf)                                            # back to the leaf alone
    assert "lastAuthResolvedToRoot" not in _cert_auth(cadmin, iid)


def test_an_oidc_cert_login_carries_the_flags_in_its_claims(certs, cadmin, keys):
    iid, chain = enrolled(certs, cadmin, keys, "rx-oidc")
    auth_id = _cert_auth(cadmin, iid)["id"]
    assert cadmin.post(f"/authenticators/{auth_id}/request-extend", json={"rollKeys": True}).status_code == 200
    certs.present(_leaf(chain))
    verifier = secrets.token_urlsafe(40)
    q = {"client_id": "openziti", "response_type": "code", "scope": "openid offline_access", "state": "st4te",
         "redirect_uri": REDIRECT, "code_challenge": challenge(verifier), "code_challenge_method": "S256"}
    r = certs.client.get("/oidc/authorize?" + urllib.parse.urlencode(q), follow_redirects=False)
    loc = urllib.parse.urlparse(r.headers["location"])
    assert loc.path == "/oidc/login/cert", loc     # a certificate shown: the cert step
    req_id = urllib.parse.parse_qs(loc.query)["authRequestID"][0]
    r = certs.client.post(f"/oidc/login/cert?authRequestID={req_id}", json={}, follow_redirects=False)
    assert r.status_code == 302, r.text
    tokens = finish(certs.client, r.headers["location"], verifier)
    claims = jwt.decode(tokens["access_token"], options={"verify_signature": False})
    assert (claims["z_cer"], claims["z_ckrr"], claims["z_iccc"]) == (True, True, True)
    current = certs.client.get(CLIENT + "/current-api-session", headers=bearer(tokens["access_token"])).json()["data"]
    assert current["improperClientCertChain"] is True and current["isCertExtendRequested"] is True
    # a refresh keeps them
    r = certs.client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "client_id": "openziti",
                                                     "refresh_token": tokens["refresh_token"]})
    assert r.status_code == 200, r.text
    assert jwt.decode(r.json()["access_token"], options={"verify_signature": False})["z_iccc"] is True
    # a password login's tokens say false
    certs.present()
    plain = jwt.decode(tokens_for(certs.client)["access_token"], options={"verify_signature": False})
    assert (plain["z_cer"], plain["z_ckrr"], plain["z_iccc"]) == (False, False, False)
