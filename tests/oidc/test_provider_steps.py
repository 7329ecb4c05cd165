"""The OIDC login steps beyond the password: external JWT (the primary rules of the identity's
auth policy apply as on /authenticate), TOTP enrollment when the policy asks for TOTP the identity
does not have yet, and the lockout shared with /authenticate."""

from __future__ import annotations

import secrets
import urllib.parse

import jwt

from tests.auth.conftest import PASSWORD, Net, code, secret_of
from tests.auth.test_extjwt import Keys, cert_signer, claims, fp_kid, sign
from tests.conftest import CLIENT
from tests.oidc.test_provider import bearer, exchange, login, start


def finish(client, redirect: str, verifier: str) -> dict:
    r = client.get(redirect, follow_redirects=False)
    auth_code = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["code"][0]
    r = exchange(client, auth_code, verifier)
    assert r.status_code == 200, r.text
    return r.json()


def test_ext_jwt_login_step(client, admin):
    net = Net(admin)
    signer = cert_signer(admin)
    ident = net.identity()
    verifier = secrets.token_urlsafe(40)
    req_id = start(client, verifier)
    token = sign(Keys.main, fp_kid(), claims(ident))
    r = client.post(f"/oidc/login/ext-jwt?authRequestID={req_id}", headers=bearer(token), json={},
                    follow_redirects=False)
    assert r.status_code == 302, r.text
    t = finish(client, r.headers["location"], verifier)
    c = jwt.decode(t["access_token"], options={"verify_signature": False})
    assert c["sub"] == ident and c["amr"] == ["ext-jwt"]
    # a policy that does not allow ext-jwt refuses the step as /authenticate does
    policy = net.policy(primary={"extJwt": {"allowed": False}})
    assert admin.patch(f"/identities/{ident}", json={"authPolicyId": policy}).status_code == 200
    req_id = start(client, verifier)
    r = client.post(f"/oidc/login/ext-jwt?authRequestID={req_id}", headers=bearer(token), json={},
                    follow_redirects=False)
    assert r.status_code == 401
    assert c["iss"].endswith("/oidc") and signer


def test_totp_enrollment_during_login_when_the_policy_requires_it(client, admin):
    net = Net(admin)
    policy = net.policy(secondary={"requireTotp": True})
    ident, username = net.user(policy=policy)
    verifier = secrets.token_urlsafe(40)
    req_id = start(client, verifier)
    r = login(client, req_id, username=username, password=PASSWORD)
    assert r.status_code == 200 and r.headers["totp-required"] == "true"
    (query,) = r.json()["authQueries"]
    assert query["typeId"] == "TOTP" and query["isTotpEnrolled"] is False
    r = client.post("/oidc/login/totp/enroll", json={"id": req_id})
    assert r.status_code == 201, r.text
    secret = secret_of(r.json())
    wrong = client.post("/oidc/login/totp/enroll/verify", json={"id": req_id, "code": "000000"})
    assert wrong.status_code == 400 and wrong.json()["code"] == "INVALID_TOTP_CODE"   # the bare error, as upstream
    r = client.post("/oidc/login/totp/enroll/verify", json={"id": req_id, "code": code(secret)},
                    follow_redirects=False)
    assert r.status_code == 302, r.text
    t = finish(client, r.headers["location"], verifier)
    assert sorted(jwt.decode(t["access_token"], options={"verify_signature": False})["amr"]) == ["password", "totp"]
    assert client.get(CLIENT + "/services", headers=bearer(t["access_token"])).status_code == 200
    # enrolling is for logged-in auth requests only
    assert client.post("/oidc/login/totp/enroll", json={"id": start(client, verifier)}).status_code == 401
    # the enrollment is audited as /current-identity/mfa's is (the same handlers.mfa.enroll and
    # verify), attributed to the identity; its API session did not exist yet
    audit = admin.as_prefix("").get(f'/ziti-lite/v1/audit?filter=entityType="mfas" and identityId="{ident}"'
                                    "&sort=createdAt asc").json()["data"]
    assert [r["operation"] for r in audit] == ["oidcEnrollMfa", "oidcVerifyMfa"]
    assert all(r["path"] in ("/oidc/login/totp/enroll", "/oidc/login/totp/enroll/verify") for r in audit)
    assert audit[0]["changes"]["secret"] == {"old": None, "new": "[redacted]"}
    assert audit[1]["changes"] == {"isVerified": {"old": False, "new": True}}
    name = admin.get(f"/identities/{ident}").json()["data"]["name"]
    assert all(r["identityName"] == name and r["apiSessionId"] is None for r in audit)


def test_the_password_step_shares_the_lockout_of_authenticate(client, admin):
    net = Net(admin)
    policy = net.policy(primary={"updb": {"allowed": True, "maxAttempts": 1, "lockoutDurationMinutes": 5}})
    ident, username = net.user(policy=policy)
    verifier = secrets.token_urlsafe(40)
    for _ in range(2):
        assert login(client, start(client, verifier), username=username, password="wrong-Passw0rd").status_code == 401
    # locked: the right password is refused on both paths now
    assert login(client, start(client, verifier), username=username, password=PASSWORD).status_code == 401
    assert net.authenticate(username).status_code == 401


def test_an_ext_jwt_secondary_factor_goes_beside_the_access_token(client, admin):
    """A policy's ``requireExtJwtSigner``: the OIDC token alone is partial; with the external
    JWT as a second ``Authorization: Bearer`` (as beside a zt-session) it is a full session."""
    net = Net(admin)
    signer = cert_signer(admin)
    policy = net.policy(secondary={"requireExtJwtSigner": signer})
    ident, username = net.user(policy=policy)
    verifier = secrets.token_urlsafe(40)
    r = login(client, start(client, verifier), username=username, password=PASSWORD)
    assert r.status_code == 302, r.text
    t = finish(client, r.headers["location"], verifier)
    ours = ("authorization", f"Bearer {t['access_token']}")
    theirs = ("authorization", f"Bearer {sign(Keys.main, fp_kid(), claims(ident))}")
    assert client.get(CLIENT + "/services", headers=[ours]).status_code == 401
    assert client.get(CLIENT + "/current-api-session", headers=[ours]).status_code == 200   # partial
    assert client.get(CLIENT + "/services", headers=[ours, theirs]).status_code == 200
    assert client.get(CLIENT + "/services", headers=[theirs, ours]).status_code == 200
