"""The OIDC provider as a client drives it over HTTP: discovery, keys, the authorization-code flow
with PKCE S256, refresh rotation, and upstream's OAuth error answers for each bad input."""

from __future__ import annotations

import base64
import hashlib
import secrets
import urllib.parse

import jwt
import pytest

from tests.builders import PASSWORD, Net
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, MGMT, assert_error
from ziti_lite import clock
from ziti_lite.oidc import common, provider

REDIRECT = "http://127.0.0.1:20202/auth/callback"


def challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def start(client, verifier: str, redirect: str = REDIRECT, **extra) -> str:
    """GET /oidc/authorize; returns the auth request id from the login redirect."""
    q = {"client_id": "openziti", "response_type": "code", "scope": "openid offline_access",
         "redirect_uri": redirect, "state": "st4te", "code_challenge": challenge(verifier),
         "code_challenge_method": "S256", **extra}
    r = client.get("/oidc/authorize?" + urllib.parse.urlencode(q), follow_redirects=False)
    assert r.status_code == 302, r.text
    loc = urllib.parse.urlparse(r.headers["location"])
    assert loc.path == "/oidc/login/username"
    return urllib.parse.parse_qs(loc.query)["authRequestID"][0]


def login(client, req_id: str, username=ADMIN_USER, password=ADMIN_PASSWORD):
    return client.post(f"/oidc/login/password?authRequestID={req_id}", json={"username": username,
                       "password": password}, headers={"accept": "application/json"}, follow_redirects=False)


def code_for(client, verifier: str, **kw) -> str:
    req_id = start(client, verifier)
    r = login(client, req_id, **kw)
    assert r.status_code == 302, r.text
    r = client.get(r.headers["location"], follow_redirects=False)
    assert r.status_code == 302, r.text
    target = urllib.parse.urlparse(r.headers["location"])
    assert target.scheme + "://" + target.netloc + target.path == REDIRECT
    q = urllib.parse.parse_qs(target.query)
    assert q["state"] == ["st4te"]
    return q["code"][0]


def exchange(client, code: str, verifier: str, redirect: str = REDIRECT):
    return client.post("/oidc/oauth/token", data={"grant_type": "authorization_code", "code": code,
                                            "code_verifier": verifier, "redirect_uri": redirect,
                                            "client_id": "openziti"})


def tokens_for(client, **kw) -> dict:
    verifier = secrets.token_urlsafe(40)
    r = exchange(client, code_for(client, verifier, **kw), verifier)
    assert r.status_code == 200, r.text
    return r.json()


def bearer(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def test_version_advertises_oidc_auth(client):
    assert client.get("/version").json()["data"]["capabilities"] == ["OIDC_AUTH"]


def test_no_oidc_auth_while_a_real_router_may_be_of_a_v1_line(client, admin, ctl):
    """Real routers validate JWT API sessions from the router data model, which ziti-lite streams
    to v2.0 routers only: with a router enrolled that has not said it is of v2.0 or later (since
    start), SDKs that prefer OIDC are left on legacy sessions, which every router takes."""
    rid = admin.create("edge-routers", {"name": "oidc-site"})
    assert client.get("/version").json()["data"]["capabilities"] == ["OIDC_AUTH"]   # not enrolled yet
    with ctl.store.write():
        ctl.store.execute("UPDATE routers SET fingerprint = 'ab' || id, is_verified = 1 WHERE id = ?", (rid,))
    assert client.get("/version").json()["data"]["capabilities"] == []
    assert client.get("/").json()["data"]["capabilities"] == []
    # nor the edge-oidc API that 2.0 clients (ZAC 4.5) log in through when it is listed
    assert "edge-oidc" not in client.get("/version").json()["data"]["apiVersions"]
    ctl.router_lines[rid] = "v1.6.20"          # what its hello said (ctrl/server.py)
    assert client.get("/version").json()["data"]["capabilities"] == []
    ctl.router_lines[rid] = "v2.0.3"
    assert client.get("/version").json()["data"]["capabilities"] == ["OIDC_AUTH"]
    assert "edge-oidc" in client.get("/version").json()["data"]["apiVersions"]
    del ctl.router_lines[rid]
    assert admin.delete(f"/edge-routers/{rid}").status_code == 200
    assert "edge-oidc" in client.get("/version").json()["data"]["apiVersions"]
    assert client.get("/version").json()["data"]["capabilities"] == ["OIDC_AUTH"]


def test_discovery_under_both_paths_names_the_endpoints(client, ctl):
    a = client.get("/.well-known/openid-configuration").json()
    b = client.get("/oidc/.well-known/openid-configuration").json()
    assert a == b
    assert a["issuer"].endswith("/oidc")
    assert a["token_endpoint"] == a["issuer"] + "/oauth/token"
    assert a["jwks_uri"] == a["issuer"] + "/keys"
    assert a["code_challenge_methods_supported"] == ["S256"]


def test_tokens_verify_against_the_published_keys_with_upstreams_claims(client):
    keys = client.get("/oidc/keys").json()["keys"]
    assert len(keys) == 1 and "d" not in keys[0]   # the public half only
    answer = tokens_for(client)
    assert answer["token_type"] == "Bearer" and answer["expires_in"] == 1800
    head = jwt.get_unverified_header(answer["access_token"])
    assert head["kid"] == keys[0]["kid"]
    public = jwt.PyJWK(keys[0]).key
    claims = jwt.decode(answer["access_token"], public, algorithms=[keys[0]["alg"]], options={"verify_aud": False})
    assert claims["z_t"] == "a" and claims["aud"] == ["openziti"] and claims["amr"] == ["password"]
    assert claims["z_ia"] is True and claims["z_asid"]
    refresh = jwt.decode(answer["refresh_token"], public, algorithms=[keys[0]["alg"]], options={"verify_aud": False})
    assert refresh["z_t"] == "r" and refresh["z_asid"] == claims["z_asid"] and refresh["jti"] != claims["jti"]
    ident = jwt.decode(answer["id_token"], public, algorithms=[keys[0]["alg"]], audience="openziti")
    assert ident["sub"] == claims["sub"]


def test_wrong_verifier_is_invalid_grant_and_leaves_the_code_to_its_holder(client):
    verifier = secrets.token_urlsafe(40)
    code = code_for(client, verifier)
    r = exchange(client, code, "x" + verifier)
    assert r.status_code == 400
    assert r.json() == {"error": "invalid_grant", "error_description": "invalid code challenge"}
    assert exchange(client, code, verifier).status_code == 200   # upstream keeps it too
    assert exchange(client, code, verifier).json()["error"] == "invalid_grant"


def test_a_replayed_code_is_invalid_grant(client):
    verifier = secrets.token_urlsafe(40)
    code = code_for(client, verifier)
    assert exchange(client, code, verifier).status_code == 200
    r = exchange(client, code, verifier)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_a_redirect_uri_other_than_the_authorized_one_is_invalid_grant(client):
    verifier = secrets.token_urlsafe(40)
    code = code_for(client, verifier)
    r = exchange(client, code, verifier, redirect="http://127.0.0.1:1/auth/callback")
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_an_unregistered_redirect_uri_or_client_is_refused_without_redirecting(client):
    q = {"client_id": "openziti", "response_type": "code", "scope": "openid", "redirect_uri": "https://evil.example/cb",
         "code_challenge": "x", "code_challenge_method": "S256"}
    r = client.get("/oidc/authorize?" + urllib.parse.urlencode(q), follow_redirects=False)
    assert r.status_code == 400 and r.text.startswith("The requested redirect_uri is missing in the client")
    r = client.get("/oidc/authorize?" + urllib.parse.urlencode({**q, "client_id": "x", "redirect_uri": REDIRECT}),
                   follow_redirects=False)
    assert r.status_code == 400 and r.text == "unable to retrieve client by id"


def test_without_openid_the_client_is_sent_back_invalid_scope(client):
    r = client.get("/oidc/authorize?" + urllib.parse.urlencode({
        "client_id": "openziti", "response_type": "code", "scope": "offline_access", "redirect_uri": REDIRECT,
        "state": "s", "code_challenge": "x", "code_challenge_method": "S256"}), follow_redirects=False)
    assert r.status_code == 302
    q = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)
    assert q["error"] == ["invalid_scope"] and q["state"] == ["s"]


def test_without_pkce_the_code_is_refused_at_the_token_endpoint(client):
    r = client.get("/oidc/authorize?" + urllib.parse.urlencode({
        "client_id": "native", "response_type": "code", "scope": "openid", "redirect_uri": REDIRECT,
        "state": "st4te"}), follow_redirects=False)
    req_id = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["authRequestID"][0]
    r = client.get(login(client, req_id).headers["location"], follow_redirects=False)
    code = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)["code"][0]
    r = client.post("/oidc/oauth/token", data={"grant_type": "authorization_code", "code": code,
                                               "redirect_uri": REDIRECT, "client_id": "native"})
    assert r.status_code == 400
    assert r.json() == {"error": "invalid_request", "error_description": "code_challenge required"}


def test_an_expired_auth_request_cannot_log_in_nor_be_exchanged(client, ctl, monkeypatch):
    verifier = secrets.token_urlsafe(40)
    req_id = start(client, verifier)
    ctl.oidc.requests[req_id].created -= provider.AUTH_REQUEST_SECONDS + 1
    assert login(client, req_id).status_code == 401
    code = code_for(client, verifier)
    for r in ctl.oidc.requests.values():
        r.created -= provider.AUTH_REQUEST_SECONDS + 1
    r = exchange(client, code, verifier)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_a_wrong_password_gets_no_code(client):
    req_id = start(client, secrets.token_urlsafe(40))
    r = login(client, req_id, password="wrong-Passw0rd")
    assert r.status_code == 401
    r = client.get(f"/oidc/authorize/callback?id={req_id}", follow_redirects=False)
    q = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["location"]).query)
    assert q["error"] == ["interaction_required"] and "code" not in q


@pytest.mark.parametrize("form", [{}, {"grant_type": "password"}, {"grant_type": "refresh_token"},
                                  {"grant_type": "authorization_code", "code": "nope"}])
def test_bad_token_requests_get_oauth_errors_not_500(client, form):
    r = client.post("/oidc/oauth/token", data=form)
    assert r.status_code == 400
    assert r.json()["error"] in ("invalid_request", "unsupported_grant_type", "invalid_grant")


def test_refresh_rotates_and_the_old_refresh_token_is_refused_a_minute_on(client):
    first = tokens_for(client)
    r = client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                         "client_id": "openziti"})
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert client.get(CLIENT + "/current-identity", headers=bearer(second["access_token"])).status_code == 200
    # the answer lost (ZAC 4.5 reloaded while refreshing): the replaced token refreshes again a
    # while, as upstream's (it revokes replaced refresh tokens in batches, a minute apart)
    lost = client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "client_id": "openziti",
                                                  "refresh_token": first["refresh_token"]})
    assert lost.status_code == 200, lost.text
    clock.advance(common.REUSE_SECONDS)
    again = client.post("/oidc/oauth/token",
                        data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"]})
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    third = client.post("/oidc/oauth/token",
                        data={"grant_type": "refresh_token", "refresh_token": second["refresh_token"]})
    assert third.status_code == 200


@pytest.mark.parametrize("path", ["/oidc/revoke", "/oidc/oauth/revoke"])   # the second: ZAC 4.5.1's logout
def test_revoking_a_refresh_token_ends_its_use(client, path):
    t = tokens_for(client)
    assert client.post(path, data={"token": t["refresh_token"]}).status_code == 200
    r = client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "refresh_token": t["refresh_token"]})
    assert r.json()["error"] == "invalid_grant"


def test_revoking_a_replaced_refresh_token_ends_its_minute_at_once(client):
    first = tokens_for(client)
    r = client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"]})
    assert r.status_code == 200
    assert client.post("/oidc/oauth/revoke", data={"token": first["refresh_token"]}).status_code == 200
    r = client.post("/oidc/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"]})
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_without_oidc_nothing_is_served(tmp_path):
    from starlette.testclient import TestClient

    from ziti_lite.app import create_app
    from ziti_lite.config import Settings
    app = create_app(Settings(db=str(tmp_path / "x.db"), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                              oidc=False))
    with TestClient(app) as c:
        assert c.get("/version").json()["data"]["capabilities"] == []
        assert c.get("/oidc/keys").status_code == 404
        assert_error(c.get(MGMT + "/identities", headers={"authorization": "Bearer a.b.c"}), 401, "UNAUTHORIZED")
    app.state.controller.store.close()


TE = "urn:ietf:params:oauth:grant-type:token-exchange"
TT_REFRESH = "urn:ietf:params:oauth:token-type:refresh_token"
TT_ID = "urn:ietf:params:oauth:token-type:id_token"


def test_token_exchange_refreshes_as_newer_sdks_do(client):
    """The Go SDK's refresh: the refresh token for new tokens, then (with the same refresh token)
    for an ID token; a use of it once its replacement's minute is over is refused."""
    first = tokens_for(client)
    r = client.post("/oidc/oauth/token", data={"grant_type": TE, "subject_token": first["refresh_token"],
                                               "subject_token_type": TT_REFRESH, "requested_token_type": TT_REFRESH,
                                               "client_id": "native"})
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["issued_token_type"] == TT_REFRESH and new["refresh_token"] != first["refresh_token"]
    assert client.get(CLIENT + "/current-identity", headers=bearer(new["access_token"])).status_code == 200
    r = client.post("/oidc/oauth/token", data={"grant_type": TE, "subject_token": first["refresh_token"],
                                               "subject_token_type": TT_REFRESH, "requested_token_type": TT_ID})
    assert r.status_code == 200 and r.json()["token_type"] == "N_A"
    assert jwt.decode(r.json()["access_token"], options={"verify_signature": False})["sub"]
    # the ID token grants nothing on the APIs
    assert_error(client.get(CLIENT + "/current-identity", headers=bearer(r.json()["access_token"])), 401,
                 "UNAUTHORIZED")
    clock.advance(common.REUSE_SECONDS + common.ID_TOKEN_GRACE_SECONDS)
    r = client.post("/oidc/oauth/token", data={"grant_type": TE, "subject_token": first["refresh_token"],
                                               "subject_token_type": TT_REFRESH})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"


@pytest.mark.parametrize("form", [
    {"subject_token_type": TT_REFRESH},
    {"subject_token": "x"},
    {"subject_token": "x", "subject_token_type": TT_ID},
    {"subject_token": "x.y.z", "subject_token_type": TT_REFRESH},
])
def test_bad_token_exchanges_are_invalid_request(client, form):
    r = client.post("/oidc/oauth/token", data={"grant_type": TE, **form})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"


def test_logins_leave_their_audit_rows_under_oidc(client, admin):
    tokens_for(client)
    req_id = start(client, secrets.token_urlsafe(40))
    assert login(client, req_id, password="wrong-Passw0rd").status_code == 401
    r = admin.client.get('/ziti-lite/v1/audit?filter=operation="authenticate"&sort=id desc&limit=2',
                         headers={"zt-session": admin.token})
    assert r.status_code == 200, r.text
    failed, ok = r.json()["data"]
    assert (failed["path"], failed["outcome"], failed["reason"]) == ("/oidc/login/password", "failure", "INVALID_AUTH")
    assert (ok["path"], ok["outcome"], ok["identityName"]) == ("/oidc/login/password", "success", "Default Admin")


def test_answers_carry_the_controllers_headers_and_preflights_pass(client):
    r = client.get("/oidc/keys")
    assert r.headers["access-control-allow-origin"] == "*" and r.headers["server"].startswith("ziti-controller/")
    r = client.options("/oidc/oauth/token")
    assert r.status_code == 200 and "authorization" in r.headers["access-control-allow-headers"]


GARBAGE = [b"", b"{", b"[1,2]", b'{"username": 5, "password": [], "configTypes": {"a": 1}, "sdkInfo": [1]}',
           b'{"id": {"x": 1}, "code": 123}', b"\xff\xfe", b"a=%ff&&=&grant_type=authorization_code&code=%00"]


@pytest.mark.parametrize("path", ["/oidc/login/password", "/oidc/login/cert", "/oidc/login/ext-jwt", "/oidc/login/totp",
                                  "/oidc/login/totp/enroll", "/oidc/login/totp/enroll/verify", "/oidc/oauth/token",
                                  "/oidc/revoke", "/oidc/oauth/revoke", "/oidc/authorize", "/oidc/end_session",
                                  "/oidc/userinfo"])
def test_garbage_never_gets_a_500(client, path):
    req_id = start(client, secrets.token_urlsafe(40))
    for body in GARBAGE:
        for ctype in ("application/json", "application/x-www-form-urlencoded"):
            r = client.post(f"{path}?authRequestID={req_id}", content=body, headers={"content-type": ctype,
                            "authorization": "Bearer e30.e30.e30"}, follow_redirects=False)
            assert r.status_code < 500, (path, body, r.text)


def test_introspection_follows_revocation(client):
    t = tokens_for(client)
    r = client.post("/oidc/oauth/introspect", data={"token": t["access_token"]}).json()
    assert r["active"] is True and r["token_type"] == "Bearer"
    assert client.post("/oidc/oauth/introspect", data={"token": "x.y.z"}).json() == {"active": False}
    client.delete(CLIENT + "/current-api-session", headers=bearer(t["access_token"]))
    assert client.post("/oidc/oauth/introspect", data={"token": t["refresh_token"]}).json() == {"active": False}


@pytest.mark.parametrize("form", [False, True])
def test_a_login_records_the_clients_sdk_and_environment_on_its_identity(client, admin, form):
    """As ``/authenticate`` does: JSON objects, or the flat form fields upstream's SDKs post."""
    req_id = start(client, secrets.token_urlsafe(40))
    sdk = {"appId": "tunnel", "appVersion": f"v1.6.20-{form}", "type": "ziti-sdk-golang", "version": "v1.1.2"}
    env = {"arch": "amd64", "os": "linux", "osRelease": "6.1", "osVersion": "12"}
    creds = {"username": ADMIN_USER, "password": ADMIN_PASSWORD}
    if form:
        fields = {**creds, **{"sdk" + k[0].upper() + k[1:]: v for k, v in sdk.items()},
                  **{"env" + k[0].upper() + k[1:]: v for k, v in env.items()}}
        r = client.post(f"/oidc/login/password?authRequestID={req_id}", data=fields,
                        headers={"accept": "application/json"}, follow_redirects=False)
    else:
        r = client.post(f"/oidc/login/password?authRequestID={req_id}", json={**creds, "sdkInfo": sdk, "envInfo": env},
                        headers={"accept": "application/json"}, follow_redirects=False)
    assert r.status_code == 302, r.text
    me = admin.client.get(f"{MGMT}/identities?filter=name=\"Default Admin\"", headers={"zt-session": admin.token})
    shown = me.json()["data"][0]
    assert shown["sdkInfo"] == sdk and shown["envInfo"] == env


def test_a_refused_login_step_answers_openziti_2s_api_error_as_json(client, admin):
    """v2.0.3 answers a refused step with the bare API error as JSON (SDKs read it; a page or
    text only to a client that asks for HTML first): a disabled identity, a wrong password, an
    unknown auth request."""
    net = Net(admin)
    ident, username = net.user()
    assert admin.post(f"/identities/{ident}/disable", json={"durationMinutes": 0}).status_code == 200
    for accept in ({}, {"accept": "*/*"}, {"accept": "application/json"}, {"accept": "application/json, text/html"}):
        r = client.post(f"/oidc/login/password?authRequestID={start(client, secrets.token_urlsafe(40))}",
                        json={"username": username, "password": PASSWORD}, headers=accept, follow_redirects=False)
        assert r.status_code == 401 and r.headers["content-type"].startswith("application/json"), accept
        assert r.json() == {"code": "INVALID_AUTH", "message": "The authentication request failed"}
    r = client.post(f"/oidc/login/password?authRequestID={start(client, secrets.token_urlsafe(40))}",
                    data={"username": username, "password": PASSWORD},
                    headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, follow_redirects=False)
    assert r.status_code == 401 and r.headers["content-type"].startswith("text/html")
    assert "The authentication request failed" in r.text
    r = client.post("/oidc/login/password?authRequestID=no-such-request", json={"username": username,
                                                                               "password": PASSWORD})
    assert r.status_code == 401 and r.json()["code"] == "UNAUTHORIZED"
