"""POST /authenticate?method=cert with the certificate of the (simulated) TLS connection."""

from __future__ import annotations

import pytest

from tests.conftest import CLIENT, MGMT, assert_error
from tests.enroll.conftest import csr, fingerprint, issue, make_ca, ott_identity, register_ca
from ziti_lite import clock

STRICT_CERT_POLICY = {
    "name": "strict-certs",
    "primary": {"cert": {"allowed": True, "allowExpiredCerts": False},
                "extJwt": {"allowed": False, "allowedSigners": []},
                "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 0, "minPasswordLength": 5,
                         "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False}},
    "secondary": {"requireTotp": False},
}


def enrolled(certs, admin, keys, name: str, key: int = 0) -> tuple[str, str]:
    """An identity enrolled with ott: (id, chain PEM of its certificate)."""
    iid, token = ott_identity(admin, name)
    r = certs.present().post(f"/enroll?method=ott&token={token}", content=csr(keys[key], iid),
                             headers={"content-type": "text/plain", "accept": "application/json"})
    assert r.status_code == 200, r.text
    return iid, r.json()["data"]["cert"]


@pytest.mark.parametrize("prefix", [CLIENT, MGMT, ""])
def test_cert_login_on_every_prefix(certs, cadmin, keys, prefix):
    iid, chain = enrolled(certs, cadmin, keys, "cert-" + (prefix.split("/")[2] if prefix else "root"))
    r = certs.cert_login(chain, prefix=prefix)
    assert r.status_code == 200, r.text
    s = r.json()["data"]
    assert s["identityId"] == iid and s["isCertExtendable"] is True and s["authQueries"] == []
    auth_id = cadmin.get(f"/identities/{iid}").json()["data"]["authenticators"]["cert"]["id"]
    assert s["authenticatorId"] == auth_id
    me = certs.client.get(CLIENT + "/current-identity", headers={"zt-session": r.headers["zt-session"]})
    assert me.json()["data"]["id"] == iid


def test_leaf_only_and_any_intermediate_order(certs, cadmin, keys, ctl):
    iid, chain = enrolled(certs, cadmin, keys, "orders")
    leaf, signer = (
        chain.split("-----END CERTIFICATE-----\n")[0] + "-----END CERTIFICATE-----\n",
        ctl.state["signer_cert"],
    )
    for presented in ([leaf], [leaf, signer], [leaf, ctl.state["root_cert"], signer]):
        r = certs.cert_login(*presented)
        assert r.status_code == 200, r.text


def test_no_or_unknown_certificate_is_invalid_auth(certs, cadmin, keys):
    assert_error(certs.cert_login(), 401, "INVALID_AUTH")
    stranger = make_ca("Stranger CA", keys[1])
    assert_error(certs.cert_login(issue(stranger, "someone", keys[2])), 401, "INVALID_AUTH")
    # a network-issued certificate without an authenticator (its identity was deleted)
    iid, chain = enrolled(certs, cadmin, keys, "deleted-later")
    assert cadmin.delete(f"/identities/{iid}").status_code == 200
    assert_error(certs.cert_login(chain), 401, "INVALID_AUTH")


def test_disabled_identity_is_refused(certs, cadmin, keys):
    iid, chain = enrolled(certs, cadmin, keys, "disabled-cert")
    assert cadmin.post(f"/identities/{iid}/disable", json={"durationMinutes": 0}).status_code == 200
    assert_error(certs.cert_login(chain), 401, "INVALID_AUTH")
    assert cadmin.post(f"/identities/{iid}/enable").status_code == 200
    assert certs.cert_login(chain).status_code == 200


def test_auth_policy_cert_rules(certs, cadmin, keys):
    iid, chain = enrolled(certs, cadmin, keys, "policy-cert")
    # default policy: expired certificates are fine
    clock.advance(400 * 86400)
    assert certs.cert_login(chain).status_code == 200
    clock.reset()
    strict = cadmin.create("auth-policies", STRICT_CERT_POLICY)
    assert cadmin.patch(f"/identities/{iid}", json={"authPolicyId": strict}).status_code == 200
    assert certs.cert_login(chain).status_code == 200
    clock.advance(400 * 86400)
    assert_error(certs.cert_login(chain), 401, "INVALID_AUTH")
    clock.reset()
    assert cadmin.patch(f"/auth-policies/{strict}", json={"primary": {"cert": {"allowed": False}}}).status_code == 200
    assert_error(certs.cert_login(chain), 401, "INVALID_AUTH")


def test_admin_created_cert_authenticator(certs, cadmin, keys):
    root = make_ca("Admin Auth CA", keys[0])
    ca_id = register_ca(cadmin, root, "admin-auth-ca", keys[1])
    iid = cadmin.create("identities", {"name": "byo-cert", "type": "Device", "isAdmin": False})
    leaf = issue(root, "byo", keys[2])
    r = cadmin.post("/authenticators", json={"method": "cert", "identityId": iid, "certPem": leaf})
    assert r.status_code == 201, r.text
    detail = cadmin.get(f"/authenticators/{r.json()['data']['id']}").json()["data"]
    assert detail["fingerprint"] == fingerprint(leaf) and "isIssuedByNetwork" not in detail
    r = certs.cert_login(leaf)
    assert r.status_code == 200 and r.json()["data"]["identityId"] == iid
    assert r.json()["data"]["isCertExtendable"] is False
    # its CA's deletion takes its authenticators along
    assert cadmin.delete(f"/cas/{ca_id}").status_code == 200
    assert cadmin.get(f"/identities/{iid}").json()["data"]["authenticators"] == {}
    assert_error(certs.cert_login(leaf), 401, "INVALID_AUTH")


def test_admin_cert_authenticator_must_chain_to_a_trusted_ca(cadmin, keys):
    iid = cadmin.create("identities", {"name": "untrusted-cert", "type": "Device", "isAdmin": False})
    stranger = make_ca("Unregistered CA", keys[0])
    r = cadmin.post(
        "/authenticators", json={"method": "cert", "identityId": iid, "certPem": issue(stranger, "x", keys[1])}
    )
    assert_error(r, 400, "CERT_FAILED_VALIDATION")
    r = cadmin.post("/authenticators", json={"method": "cert", "identityId": iid, "certPem": "garbage"})
    assert_error(r, 400, "COULD_NOT_PARSE_PEM_BLOCK")
    assert cadmin.get(f"/identities/{iid}").json()["data"]["authenticators"] == {}


def test_ca_without_auth_enabled_does_not_authenticate(certs, cadmin, keys):
    root = make_ca("No Auth CA", keys[3])
    register_ca(cadmin, root, "no-auth-ca", keys[4], isAuthEnabled=False)
    leaf = issue(root, "enrolls-but-no-login", keys[5])
    assert certs.present(leaf).post("/enroll?method=ca", json={}).status_code == 200
    assert_error(certs.cert_login(leaf), 401, "INVALID_AUTH")


def test_external_id_claim_login(certs, cadmin, keys):
    root = make_ca("Spiffe CA", keys[0])
    claim = {
        "location": "SAN_URI",
        "matcher": "SCHEME",
        "matcherCriteria": "spiffe",
        "parser": "SPLIT",
        "parserCriteria": "/",
        "index": 4,
    }
    register_ca(cadmin, root, "spiffe-ca", keys[1], externalIdClaim=claim, identityNameFormat="[caName]-[commonName]")
    leaf = issue(root, "workload", keys[2], uris=["https://ignored.example.com/a/b", "spiffe://example.org/device/42"])
    r = certs.present(leaf).post(CLIENT + "/enroll?method=ca", json={})
    assert r.status_code == 200, r.text
    found = cadmin.get('/identities?filter=externalId="42"').json()["data"]
    assert len(found) == 1 and found[0]["name"] == "spiffe-ca-workload" and found[0]["authenticators"] == {}
    # a new certificate with the same claim is the same identity: no authenticator needed
    rotated = issue(root, "workload", keys[3], uris=["spiffe://example.org/device/42"])
    r = certs.cert_login(rotated)
    assert r.status_code == 200 and r.json()["data"]["identityId"] == found[0]["id"]
    assert r.json()["data"]["authenticatorId"] == "internal"
    # no claim in the certificate
    assert_error(
        certs.present(issue(root, "no-uri", keys[4])).post("/enroll?method=ca", json={}), 400, "MISSING_CERT_CLAIM"
    )
    assert_error(
        certs.cert_login(issue(root, "unknown", keys[4], uris=["spiffe://example.org/device/7"])), 401, "INVALID_AUTH"
    )
