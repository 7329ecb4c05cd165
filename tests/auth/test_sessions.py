"""API session states (auth-enrollment-pki.md §1.7, §2.7, §3.3, §4.1), row by row.

A session is *partial* while it owes a secondary factor: TOTP when the identity had a verified
enrollment at login or its auth policy has ``requireTotp`` (until ``/authenticate/mfa`` or a
verify on this session), or the policy's ``requireExtJwtSigner`` JWT (tests in test_extjwt.py).
A partial session reaches only its own session, ``/authenticate/mfa`` and TOTP enrollment.
"""

from __future__ import annotations

import pytest

from tests.auth.conftest import code, enroll_totp, secret_of
from tests.conftest import CLIENT, MGMT, assert_error

TOTP_QUERY = {"typeId": "MFA", "provider": "ziti", "httpMethod": "POST", "httpUrl": "./authenticate/mfa",
              "minLength": 4, "maxLength": 6, "format": "alphaNumeric", "scopes": None}

# what a partial session may call (method, path) — everything else is 401 UNAUTHORIZED
PARTIAL_ALLOWED = [("GET", "/current-api-session"), ("GET", "/current-identity/mfa"),
                   ("GET", "/current-identity/mfa/qr-code")]
FULL_ONLY = [("GET", "/current-identity"), ("GET", "/current-identity/mfa/recovery-codes"),
             ("POST", "/current-identity/mfa/recovery-codes"), ("DELETE", "/current-identity/mfa"),
             ("GET", "/current-identity/authenticators")]
FULL_ONLY_MGMT = [("GET", "/services"), ("GET", "/identities"), ("GET", "/api-sessions")]


def state(api) -> dict:
    r = api.get("/current-api-session")
    assert r.status_code == 200, r.text
    return r.json()["data"]


@pytest.fixture
def enrolled(net):
    """A user with a verified TOTP enrollment: (username, secret, recovery codes)."""
    _, user = net.user()
    secret, codes = enroll_totp(net.login(user))
    return user, secret, codes


# ---------------------------------------------------------------- row: no second factor
def test_row_no_mfa_no_policy_is_fully_authenticated(net):
    _, user = net.user()
    r = net.authenticate(user)
    assert r.status_code == 200
    s = r.json()["data"]
    assert (s["authQueries"], s["isMfaRequired"], s["isMfaComplete"]) == ([], False, False)
    api = net.login(user)
    assert api.get("/current-identity").status_code == 200


# ---------------------------------------------------------------- row: verified TOTP, code not given
@pytest.mark.parametrize("prefix", [CLIENT, MGMT])
def test_row_verified_mfa_login_is_partial(net, enrolled, prefix):
    user, _, _ = enrolled
    r = net.authenticate(user, prefix=prefix)
    assert r.status_code == 200
    s = r.json()["data"]
    assert s["authQueries"] == [TOTP_QUERY]
    assert (s["isMfaRequired"], s["isMfaComplete"]) == (True, False)
    api = net.login(user, prefix=prefix)
    assert state(api)["authQueries"] == [TOTP_QUERY]


def test_row_partial_reaches_only_what_upstream_allows(net, enrolled):
    user, _, _ = enrolled
    api = net.login(user)
    for method, path in PARTIAL_ALLOWED:
        r = api.request(method, path)
        assert r.status_code != 401, (method, path, r.text)
    for method, path in FULL_ONLY:
        assert_error(api.request(method, path), 401, "UNAUTHORIZED")
    admin_partial = net.login("admin", "admin-Passw0rd", prefix=MGMT)
    secret, _ = enroll_totp(admin_partial)  # the admin enrolls too: its next session is partial
    admin2 = net.login("admin", "admin-Passw0rd", prefix=MGMT)
    for method, path in FULL_ONLY_MGMT:
        assert_error(admin2.request(method, path), 401, "UNAUTHORIZED")
    assert admin2.post("/authenticate/mfa", json={"code": code(secret)}).status_code == 200
    for method, path in FULL_ONLY_MGMT:
        assert admin2.request(method, path).status_code == 200


def test_row_partial_can_log_out(net, enrolled):
    user, _, _ = enrolled
    api = net.login(user)
    assert api.delete("/current-api-session").status_code == 200
    assert_error(api.get("/current-api-session"), 401, "UNAUTHORIZED")


# ---------------------------------------------------------------- row: code given
def test_row_wrong_code_stays_partial(net, enrolled):
    user, secret, _ = enrolled
    api = net.login(user)
    good = code(secret)
    wrong = f"{(int(good) + 1) % 1_000_000:06d}"
    for bad in (wrong, "", "abcdef", "12345", "1234567", good + " "):
        assert_error(api.post("/authenticate/mfa", json={"code": bad}), 400, "MFA_INVALID_TOKEN")
    assert_error(api.post("/authenticate/mfa", json={}), 400, "COULD_NOT_VALIDATE")
    s = state(api)
    assert (s["authQueries"], s["isMfaComplete"]) == ([TOTP_QUERY], False)
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")


@pytest.mark.parametrize("prefix", [CLIENT, MGMT])
def test_row_totp_code_completes(net, enrolled, prefix):
    user, secret, _ = enrolled
    api = net.login(user, prefix=prefix)
    r = api.post("/authenticate/mfa", json={"code": code(secret)})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    s = state(api)
    assert (s["authQueries"], s["isMfaRequired"], s["isMfaComplete"]) == ([], True, True)
    assert api.get("/current-identity").status_code == 200


def test_row_recovery_code_completes_once(net, enrolled):
    user, _, codes = enrolled
    first = net.login(user)
    assert first.post("/authenticate/mfa", json={"code": codes[0]}).status_code == 200
    assert state(first)["isMfaComplete"] is True
    second = net.login(user)
    assert_error(second.post("/authenticate/mfa", json={"code": codes[0]}), 400, "MFA_INVALID_TOKEN")
    assert second.post("/authenticate/mfa", json={"code": codes[1]}).status_code == 200


def test_row_each_new_session_owes_its_own_code(net, enrolled):
    user, secret, _ = enrolled
    a = net.login(user)
    assert a.post("/authenticate/mfa", json={"code": code(secret)}).status_code == 200
    b = net.login(user)
    assert state(b)["authQueries"] == [TOTP_QUERY]
    assert_error(b.get("/current-identity"), 401, "UNAUTHORIZED")
    assert a.get("/current-identity").status_code == 200   # the completed one stays complete


def test_row_totp_window_is_two_steps_each_way(net, enrolled, ctl):
    from ziti_lite import clock
    user, secret, _ = enrolled
    for steps, ok in ((-3, False), (3, False), (-2, True), (2, True), (0, True)):
        api = net.login(user)
        r = api.post("/authenticate/mfa", json={"code": code(secret, steps)})
        assert (r.status_code == 200) is ok, (steps, r.text)
    # a code read now is refused once the controller clock is 90 s further on
    api = net.login(user)
    old = code(secret)
    clock.advance(90)
    assert_error(api.post("/authenticate/mfa", json={"code": old}), 400, "MFA_INVALID_TOKEN")
    assert api.post("/authenticate/mfa", json={"code": code(secret)}).status_code == 200


def test_row_authenticate_mfa_without_enrollment_is_409(net):
    _, user = net.user()
    api = net.login(user)
    assert_error(api.post("/authenticate/mfa", json={"code": "123456"}), 409, "MFA_NOT_ENROLLED")


def test_row_authenticate_mfa_needs_a_session(anon):
    assert_error(anon.post("/authenticate/mfa", json={"code": "123456"}), 401, "UNAUTHORIZED")


# ---------------------------------------------------------------- row: requireTotp in the auth policy
def test_row_require_totp_without_enrollment_is_partial_and_may_enroll(net):
    policy = net.policy(secondary={"requireTotp": True})
    _, user = net.user(policy=policy)
    r = net.authenticate(user)
    s = r.json()["data"]
    assert s["authQueries"] == [TOTP_QUERY]
    assert (s["isMfaRequired"], s["isMfaComplete"]) == (False, False)
    api = net.login(user)
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")
    assert_error(api.post("/authenticate/mfa", json={"code": "123456"}), 409, "MFA_NOT_ENROLLED")
    # enrollment while partial
    assert api.post("/current-identity/mfa").status_code == 201
    detail = api.get("/current-identity/mfa").json()["data"]
    assert api.get("/current-identity/mfa/qr-code").status_code == 200
    secret = secret_of(detail)
    assert_error(
        api.post("/current-identity/mfa/verify", json={"code": "000000" if code(secret) != "000000" else "111111"}),
        400,
        "MFA_INVALID_TOKEN",
    )
    assert api.post("/current-identity/mfa/verify", json={"code": code(secret)}).status_code == 200
    s = state(api)
    assert (s["authQueries"], s["isMfaRequired"], s["isMfaComplete"]) == ([], True, True)
    assert api.get("/current-identity").status_code == 200
    # the next login owes a code (verified enrollment), and a code completes it
    again = net.login(user)
    assert state(again)["isMfaRequired"] is True
    assert again.post("/authenticate/mfa", json={"code": code(secret)}).status_code == 200
    assert again.get("/current-identity").status_code == 200


def test_row_require_totp_is_evaluated_on_every_request(net, admin):
    policy = net.policy()
    _, user = net.user(policy=policy)
    api = net.login(user)
    assert api.get("/current-identity").status_code == 200
    r = admin.patch(f"/auth-policies/{policy}", json={"secondary": {"requireTotp": True}})
    assert r.status_code == 200, r.text
    assert_error(api.get("/current-identity"), 401, "UNAUTHORIZED")
    assert state(api)["authQueries"] == [TOTP_QUERY]
    admin.patch(f"/auth-policies/{policy}", json={"secondary": {"requireTotp": False}})
    assert api.get("/current-identity").status_code == 200


def test_admin_list_shows_no_auth_queries(net, enrolled, admin):
    user, _, _ = enrolled
    api = net.login(user)
    r = admin.get(f"/api-sessions/{state(api)['id']}")
    assert r.status_code == 200
    d = r.json()["data"]
    assert (d["authQueries"], d["isMfaRequired"], d["isMfaComplete"]) == ([], True, False)


def test_mfa_pass_is_recorded_on_the_session(net, enrolled, ctl):
    from ziti_lite.auth import mfa

    user, secret, _ = enrolled
    api = net.login(user)
    sid = state(api)["id"]
    assert mfa.passed_at(ctl.store, sid) is None
    api.post("/authenticate/mfa", json={"code": code(secret)})
    assert mfa.passed_at(ctl.store, sid) is not None
