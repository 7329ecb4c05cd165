"""Password login on every path, API sessions (detail, sliding timeout, logout, admin views)."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, CLIENT, MGMT, Api, assert_error
from ziti_lite import clock
from ziti_lite.auth.methods import METHODS

SESSION_FIELDS = {"id", "createdAt", "updatedAt", "tags", "_links", "token", "identityId", "identity", "ipAddress",
                  "configTypes", "authQueries", "isMfaRequired", "isMfaComplete", "authenticatorId",
                  "isCertExtendable", "lastActivityAt", "cachedLastActivityAt"}
CURRENT_FIELDS = SESSION_FIELDS | {"expiresAt", "expirationSeconds"}


def authenticate(client, prefix: str, username=ADMIN_USER, password=ADMIN_PASSWORD, **extra):
    return client.post(
        prefix + "/authenticate?method=password", json={"username": username, "password": password, **extra}
    )


@pytest.mark.parametrize("prefix", [MGMT, CLIENT, "", "/edge/v1"], ids=["management", "client", "unprefixed", "legacy"])
def test_password_login_on_every_prefix(client, prefix):
    r = authenticate(client, prefix)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"] == {}
    s = body["data"]
    assert set(s) == CURRENT_FIELDS
    assert r.headers["zt-session"] == s["token"]
    assert s["expirationSeconds"] == 1800
    assert s["authQueries"] == [] and s["configTypes"] == []
    assert s["isMfaRequired"] is False and s["isMfaComplete"] is False and s["isCertExtendable"] is False
    assert s["identity"]["entity"] == "identities" and s["identity"]["name"] == "Default Admin"
    assert s["identity"]["id"] == s["identityId"]
    assert s["_links"] == {
        "self": {"href": f"./api-sessions/{s['id']}"},
        "sessions": {"href": f"./api-sessions/{s['id']}/sessions"},
    }
    expires = clock.parse(s["expiresAt"])
    assert dt.timedelta(minutes=29) < expires - clock.now() <= dt.timedelta(minutes=30, seconds=1)
    assert s["ipAddress"]


def test_session_works_across_apis(client):
    token = authenticate(client, CLIENT).json()["data"]["token"]
    for prefix in (MGMT, CLIENT, "", "/edge/v1"):
        r = client.get(prefix + "/current-identity", headers={"zt-session": token})
        assert r.status_code == 200, (prefix, r.text)
    assert client.get(MGMT + "/identities", headers={"zt-session": token}).status_code == 200


def test_current_api_session(admin):
    r = admin.get("/current-api-session")
    assert r.status_code == 200
    s = r.json()["data"]
    assert set(s) == CURRENT_FIELDS and s["token"] == admin.token


def test_valid_session_responses_carry_expiry_headers(admin):
    r = admin.get("/current-identity")
    assert r.headers["expiration-seconds"] == "1800"
    assert r.headers["expires-at"].endswith("+0000 UTC")


def test_config_types_are_resolved_to_ids(client):
    r = authenticate(client, CLIENT, configTypes=["intercept.v1", "host.v1", "nope", "intercept.v1"])
    assert r.status_code == 200, r.text
    assert r.json()["data"]["configTypes"] == ["g7cIWbcGg", "NH5p4FpGR"]
    r = authenticate(client, CLIENT, configTypes=["all"])
    assert r.json()["data"]["configTypes"] == ["all"]


# ------------------------------------------------------------------ failures
def test_unknown_user_and_wrong_password_look_the_same(client):
    a = authenticate(client, MGMT, username="nobody-here", password="whatever1")
    b = authenticate(client, MGMT, username=ADMIN_USER, password="wrong-password")
    for r in (a, b):
        assert_error(r, 401, "INVALID_AUTH")
        assert "zt-session" not in r.headers

    def strip(r):
        return {**r.json(), "error": {k: v for k, v in r.json()["error"].items() if k != "requestId"}}

    assert strip(a) == strip(b)
    assert a.headers.get("content-length") == b.headers.get("content-length")


@pytest.mark.parametrize(
    "body,field",
    [
        ({"username": "abc", "password": "Passw0rd"}, "username"),
        ({"username": "admin", "password": "abcd"}, "password"),
    ],
)
def test_login_body_validation(client, body, field):
    err = assert_error(client.post(MGMT + "/authenticate?method=password", json=body), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == field
    # go-openapi's wording (the real controller's answer); a password is never echoed
    assert err["cause"]["reason"] == f"{field} in body should be at least {4 if field == 'username' else 5} chars long"
    assert field != "password" or err["cause"]["value"] == "<redacted>"


def test_login_body_of_the_wrong_type(client):
    # a number for a string fails upstream's unmarshalling: COULD_NOT_PARSE_BODY naming the field
    r = client.post(MGMT + "/authenticate?method=password", json={"username": 12, "password": "Passw0rd"})
    assert "username" in assert_error(r, 400, "COULD_NOT_PARSE_BODY")["cause"]["message"]


def test_missing_credentials_and_unknown_method(client):
    # upstream's updb module: a plain cause, not a field
    for body in ({}, {"username": "admin"}, {"password": "xxxxx"}):
        err = assert_error(client.post(MGMT + "/authenticate?method=password", json=body), 400, "COULD_NOT_VALIDATE")
        assert err["cause"] == {"code": "UNHANDLED", "message": "username and password fields are required"}
    # go-openapi's required query parameter: the raw values as the cause's value
    err = assert_error(
        client.post(MGMT + "/authenticate", json={"username": "admin", "password": "xxxxx"}), 400, "COULD_NOT_VALIDATE"
    )
    assert err["cause"] == {"field": "method", "reason": "method in query is required", "value": "[]"}
    err = assert_error(client.post(MGMT + "/authenticate?method=", json={}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"] == {"field": "method", "reason": "method in query is required", "value": ""}
    # the body is bound first: its error wins
    r = client.post(MGMT + "/authenticate", content=b"{nope", headers={"content-type": "application/json"})
    assert_error(r, 400, "COULD_NOT_PARSE_BODY")
    err = assert_error(client.post(MGMT + "/authenticate?method=magic", json={}), 400, "COULD_NOT_VALIDATE")
    # the list comes from the registry of login methods, in upstream's order
    assert err["cause"]["reason"] == "method in query should be one of [password cert ext-jwt]"
    assert METHODS and all(name in err["cause"]["reason"] for name in METHODS)


def test_stale_session_header_is_ignored_on_authenticate(client):
    r = client.post(
        MGMT + "/authenticate?method=password",
        json={"username": ADMIN_USER, "password": ADMIN_PASSWORD},
        headers={"zt-session": "00000000-0000-4000-8000-000000000000"},
    )
    assert r.status_code == 200


# ------------------------------------------------------------------ sliding timeout
def test_sliding_inactivity_timeout(admin):
    clock.advance(29 * 60)
    assert admin.get("/current-identity").status_code == 200  # activity resets the window
    clock.advance(29 * 60)
    r = admin.get("/current-api-session")
    assert r.status_code == 200
    s = r.json()["data"]
    assert clock.parse(s["expiresAt"]) - clock.now() > dt.timedelta(minutes=29)
    clock.advance(31 * 60)
    assert_error(admin.get("/current-identity"), 401, "UNAUTHORIZED")
    assert_error(admin.get("/current-identity"), 401, "UNAUTHORIZED")


def test_idle_sessions_are_expired_by_the_janitor(ctl, admin):
    from ziti_lite.auth import sessions

    fresh = admin.login()
    clock.advance(20 * 60)
    assert fresh.get("/current-identity").status_code == 200
    clock.advance(15 * 60)
    assert sessions.expire(ctl) >= 1  # admin's first session idled 35 min
    assert ctl.store.value("SELECT count(*) FROM api_sessions WHERE token = ?", (admin.token,)) == 0
    assert fresh.get("/current-identity").status_code == 200


def test_the_janitor_keeps_a_session_only_this_process_saw_active(ctl, admin):
    """An SDK's API session kept alive by the embedded router is active only in memory: when its
    row falls past the timeout the janitor gives the row that activity instead of deleting it."""
    from ziti_lite.auth import sessions

    kept = admin.login()
    kept_id = kept.get("/current-api-session").json()["data"]["id"]
    idle = admin.login()
    idle_id = idle.get("/current-api-session").json()["data"]["id"]
    for _ in range(7):   # 35 minutes, past the 30-minute timeout, in steps of 5
        clock.advance(5 * 60)
        ctl.activity[kept.token] = clock.stamp()
        assert admin.get("/current-identity").status_code == 200   # the admin's own session, by requests
        sessions.expire(ctl)
    ids = {s["id"] for s in admin.get("/api-sessions?limit=100").json()["data"]}
    assert kept_id in ids and idle_id not in ids
    row = admin.get(f"/api-sessions/{kept_id}").json()["data"]
    assert clock.now() - clock.parse(row["lastActivityAt"]) < dt.timedelta(minutes=10)
    assert kept.get("/current-identity").status_code == 200


def test_activity_seen_in_memory_reaches_the_row_within_a_minute(ctl, admin):
    from ziti_lite.auth import sessions

    kept = admin.login()
    kept_id = kept.get("/current-api-session").json()["data"]["id"]
    clock.advance(30)
    seen = ctl.activity[kept.token] = clock.stamp()
    written = []
    for _ in range(sessions.FLUSH_SHARES):   # one janitor run every 5 s for a minute
        sessions.expire(ctl)
        written.append(admin.get(f"/api-sessions/{kept_id}").json()["data"]["lastActivityAt"])
        clock.advance(5)
    assert clock.parse(written[0]) <= clock.parse(seen) and clock.parse(written[-1]) == clock.parse(seen)


# ------------------------------------------------------------------ logout and admin views
def test_logout(admin):
    other = admin.login()
    r = admin.delete("/current-api-session")
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    assert_error(admin.get("/current-identity"), 401, "UNAUTHORIZED")
    assert_error(admin.delete("/current-api-session"), 401, "UNAUTHORIZED")
    assert other.get("/current-identity").status_code == 200


def test_logout_on_client_api(client):
    token = authenticate(client, "").json()["data"]["token"]
    assert client.delete("/current-api-session", headers={"zt-session": token}).status_code == 200
    assert_error(client.get(MGMT + "/current-identity", headers={"zt-session": token}), 401, "UNAUTHORIZED")


def test_api_sessions_admin_list_detail_delete(admin):
    other = admin.login()
    r = admin.get("/api-sessions")
    assert r.status_code == 200
    rows = r.json()["data"]
    assert r.json()["meta"]["pagination"]["totalCount"] == len(rows) == 2
    target = next(s for s in rows if s["token"] == other.token)
    assert set(target) == SESSION_FIELDS
    assert target["authQueries"] == []
    d = admin.get(f"/api-sessions/{target['id']}").json()["data"]
    assert d["id"] == target["id"] and "expiresAt" not in d
    assert admin.delete(f"/api-sessions/{target['id']}").status_code == 200
    assert_error(other.get("/current-identity"), 401, "UNAUTHORIZED")
    assert_error(admin.delete(f"/api-sessions/{target['id']}"), 404, "NOT_FOUND")
    assert admin.get("/current-identity").status_code == 200


def test_api_sessions_are_admin_only(admin):
    iid = admin.create("identities", {"name": "nonadmin", "type": "User", "isAdmin": False})
    admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "nonadmin", "password": "Secret-pw1"}
    )
    user = Api(admin.client, MGMT).login("nonadmin", "Secret-pw1")
    assert_error(user.get("/api-sessions"), 401, "UNAUTHORIZED")
    assert user.get("/current-identity").json()["data"]["name"] == "nonadmin"
    assert user.get("/current-api-session").status_code == 200
    assert_error(user.get("/identities"), 401, "UNAUTHORIZED")
    # made admin: the same session gains the rights at once
    admin.patch(f"/identities/{iid}", json={"isAdmin": True})
    assert user.get("/api-sessions").status_code == 200


def test_password_change_through_authenticator(admin):
    iid = admin.create("identities", {"name": "changer", "type": "User", "isAdmin": False})
    aid = admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "changer", "password": "Secret-pw1"}
    )
    assert authenticate(admin.client, MGMT, "changer", "Secret-pw1").status_code == 200
    assert admin.patch(f"/authenticators/{aid}", json={"password": "Other-pw2"}).status_code == 200
    assert_error(authenticate(admin.client, MGMT, "changer", "Secret-pw1"), 401, "INVALID_AUTH")
    assert authenticate(admin.client, MGMT, "changer", "Other-pw2").status_code == 200
    d = admin.get(f"/authenticators/{aid}").json()["data"]
    assert "password" not in d and "passwordHash" not in d and "salt" not in d


# ------------------------------------------------------------------ smoke: log in, create
def test_login_and_create_identity(admin, anon):
    iid = admin.create("identities", {"name": "alice", "type": "User", "isAdmin": False})
    r = admin.get(f"/identities/{iid}")
    assert r.status_code == 200
    assert r.json()["data"]["name"] == "alice"
    assert_error(anon.get(f"/identities/{iid}"), 401, "UNAUTHORIZED")
