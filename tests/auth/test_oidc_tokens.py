"""OIDC access tokens on the edge APIs (``Authorization: Bearer`` in place of ``zt-session``):
same identity, partial state, revocation by logout, admin deletion and the revocation list; the
token-based ``current-api-session``."""

from __future__ import annotations

import secrets
import urllib.parse

import jwt

from tests.auth.conftest import code, enroll_totp
from tests.conftest import CLIENT, MGMT, assert_error
from tests.oidc.test_provider import bearer, exchange, login, start, tokens_for
from ziti_lite import clock
from ziti_lite.auth import oidc_tokens as tokens


def test_a_token_works_on_both_apis_as_its_identity(client, admin):
    t = tokens_for(client)
    me = client.get(CLIENT + "/current-identity", headers=bearer(t["access_token"]))
    assert me.status_code == 200 and me.json()["data"]["name"] == "Default Admin"
    assert client.get(MGMT + "/identities", headers=bearer(t["access_token"])).status_code == 200


def test_current_api_session_answers_for_the_token_as_upstream(client, ctl):
    t = tokens_for(client)
    r = client.get(CLIENT + "/current-api-session", headers=bearer(t["access_token"]))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    claims = jwt.decode(t["access_token"], options={"verify_signature": False})
    assert data["id"] == claims["z_asid"] and data["token"] == t["access_token"]
    assert data["authenticatorId"] == "oidc" and 0 < data["expirationSeconds"] <= ctl.settings.oidc_access_seconds


def test_a_forged_or_foreign_token_is_refused(client):
    t = tokens_for(client)
    head, body, sig = t["access_token"].split(".")
    forged = f"{head}.{body}.{sig[:-4]}AAAA"
    assert_error(client.get(CLIENT + "/current-identity", headers=bearer(forged)), 401, "UNAUTHORIZED")
    # a refresh token is no access token
    assert_error(client.get(CLIENT + "/current-identity", headers=bearer(t["refresh_token"])), 401, "UNAUTHORIZED")


def test_logout_revokes_the_access_and_refresh_tokens(client, ctl):
    t = tokens_for(client)
    h = bearer(t["access_token"])
    assert client.delete(CLIENT + "/current-api-session", headers=h).status_code == 200
    assert_error(client.get(CLIENT + "/current-identity", headers=h), 401, "UNAUTHORIZED")
    claims = jwt.decode(t["access_token"], options={"verify_signature": False})
    assert tokens.is_revoked(ctl.store, claims["jti"])
    r = client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "refresh_token": t["refresh_token"]})
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_admin_deletion_of_the_api_session_revokes_its_tokens(client, admin):
    t = tokens_for(client)
    asid = jwt.decode(t["access_token"], options={"verify_signature": False})["z_asid"]
    assert admin.delete(f"/api-sessions/{asid}").status_code == 200
    assert_error(client.get(CLIENT + "/current-identity", headers=bearer(t["access_token"])), 401, "UNAUTHORIZED")


def test_a_partial_token_is_refused_where_a_full_session_is_needed(client, admin):
    t = tokens_for(client)
    h = bearer(t["access_token"])
    r = admin.patch("/auth-policies/default", json={"secondary": {"requireTotp": True}})
    assert r.status_code == 200, r.text
    assert_error(client.get(CLIENT + "/services", headers=h), 401, "UNAUTHORIZED")
    r = client.get(CLIENT + "/current-api-session", headers=h)   # partial is enough here
    assert r.status_code == 200 and r.json()["data"]["authQueries"][0]["typeId"] == "MFA"


def test_with_totp_the_code_comes_only_after_the_totp_step(client, admin):
    secret, _ = enroll_totp(admin)
    verifier = secrets.token_urlsafe(40)
    req_id = start(client, verifier)
    r = login(client, req_id)
    assert r.status_code == 200 and r.headers["totp-required"] == "true"
    assert r.json()["authQueries"][0]["typeId"] == "TOTP"
    cb = client.get(f"/oidc/authorize/callback?id={req_id}", follow_redirects=False)
    assert urllib.parse.parse_qs(urllib.parse.urlparse(cb.headers["location"]).query)["error"] == [
        "interaction_required"]
    bad = client.post("/oidc/login/totp", json={"id": req_id, "code": "000000"}, follow_redirects=False)
    assert bad.status_code == 400
    ok = client.post("/oidc/login/totp", json={"id": req_id, "code": code(secret)},
                     follow_redirects=False)
    assert ok.status_code == 302
    cb = client.get(ok.headers["location"], follow_redirects=False)
    auth_code = urllib.parse.parse_qs(urllib.parse.urlparse(cb.headers["location"]).query)["code"][0]
    t = exchange(client, auth_code, verifier).json()
    claims = jwt.decode(t["access_token"], options={"verify_signature": False})
    assert sorted(claims["amr"]) == ["password", "totp"]
    assert client.get(CLIENT + "/services", headers=bearer(t["access_token"])).status_code == 200


def test_revocations_are_pruned_once_their_tokens_expired(ctl):
    tokens.revoke(ctl.store, "old", 1_000)
    tokens.revoke(ctl.store, "new", 4_000_000_000)
    tokens.prune(ctl)
    assert not tokens.is_revoked(ctl.store, "old") and tokens.is_revoked(ctl.store, "new")


# ------------------------------------------------------------------ OpenZiti 2.0's /revocations
def _claims(t: dict) -> dict:
    return jwt.decode(t["access_token"], options={"verify_signature": False})


def _refresh(client, t: dict):
    return client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "client_id": "openziti",
                                                  "refresh_token": t["refresh_token"]})


def _works(client, t: dict) -> bool:
    h = bearer(t["access_token"])
    mine, mgmt = client.get(CLIENT + "/current-identity", headers=h), client.get(MGMT + "/identities", headers=h)
    assert mine.status_code == mgmt.status_code, (mine.text, mgmt.text)   # both APIs alike
    if mine.status_code != 200:
        assert_error(mine, 401, "UNAUTHORIZED")
    return mine.status_code == 200


def test_an_oidc_api_session_id_is_a_uuid_as_upstreams(client):
    assert tokens.is_uuid(_claims(tokens_for(client))["z_asid"])


def test_a_jti_revocation_refuses_that_token_only(client, admin):
    t = tokens_for(client)
    assert _works(client, t)
    assert admin.post("/revocations", json={"id": _claims(t)["jti"], "type": "JTI"}).status_code == 201
    assert not _works(client, t)
    # the session lives on: its refresh token gets a new access token, which works
    r = _refresh(client, t)
    assert r.status_code == 200, r.text
    assert _works(client, r.json())


def test_an_api_session_revocation_refuses_its_tokens_and_ends_it(client, admin):
    t, other = tokens_for(client), tokens_for(client)
    asid = _claims(t)["z_asid"]
    assert admin.get(f"/api-sessions/{asid}").status_code == 200
    assert admin.post("/revocations", json={"id": asid, "type": "API_SESSION"}).status_code == 201
    assert not _works(client, t)
    r = _refresh(client, t)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert_error(admin.get(f"/api-sessions/{asid}"), 404, "NOT_FOUND")   # ended, as a logout ends it
    assert _works(client, other)      # another session of the same identity is untouched


def test_an_identity_revocation_refuses_tokens_issued_up_to_its_second(client, admin):
    # the controller's clock runs two seconds behind, then one: the revocation comes a second
    # after the first token, and the clock back on time issues the last one a second after it
    # (tokens from a clock ahead would not be valid yet)
    clock.advance(-2)
    t = tokens_for(client)
    me = _claims(t)["sub"]
    legacy = admin.login()            # a zt-session of the same identity
    clock.advance(1)
    assert admin.post("/revocations", json={"id": me, "type": "IDENTITY"}).status_code == 201
    assert not _works(client, t)
    r = _refresh(client, t)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert legacy.get("/current-identity").status_code == 200   # legacy tokens are not affected
    # a token issued a second after the revocation works (upstream compares whole seconds)
    clock.reset()
    later = tokens_for(client)
    assert _works(client, later)


def test_a_token_issued_in_the_revocations_second_is_refused(admin, ctl):
    me = admin.get("/current-identity").json()["data"]["id"]
    assert admin.post("/revocations", json={"id": me, "type": "IDENTITY"}).status_code == 201
    second = int(clock.parse(admin.get(f"/revocations/{me}").json()["data"]["createdAt"]).timestamp())
    claims = {"jti": "j", "z_asid": "a", "sub": me}
    assert tokens.refusal(ctl.store, {**claims, "iat": second}) is not None
    assert tokens.refusal(ctl.store, {**claims, "iat": second - 1}) is not None
    assert tokens.refusal(ctl.store, {**claims, "iat": second + 1}) is None
