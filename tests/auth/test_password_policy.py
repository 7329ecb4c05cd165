"""Password logins under an auth policy (auth-enrollment-pki.md §2.3, §3.4, §11): ``updb.allowed``,
``maxAttempts``/``lockoutDurationMinutes`` counted over consecutive wrong passwords, and one
indistinguishable answer for every refusal."""

from __future__ import annotations

import datetime as dt

from tests.auth.conftest import PASSWORD
from tests.conftest import assert_error
from ziti_lite import clock

WRONG = "Wrong-Passw0rd"


def lockout_policy(net, attempts: int, minutes: int) -> str:
    return net.policy(primary={"updb": {"maxAttempts": attempts, "lockoutDurationMinutes": minutes}})


def body_without_request_id(r) -> dict:
    body = r.json()
    body["error"].pop("requestId")
    return body


def test_fourth_wrong_password_locks_for_the_lockout_duration(net, admin):
    ident, user = net.user(policy=lockout_policy(net, 3, 10))
    session = net.login(user)
    for _ in range(3):
        assert_error(net.authenticate(user, WRONG), 401, "INVALID_AUTH")
    assert admin.get(f"/identities/{ident}").json()["data"]["disabled"] is False
    assert session.get("/current-identity").status_code == 200
    assert_error(net.authenticate(user, WRONG), 401, "INVALID_AUTH")           # the 4th: locks
    d = admin.get(f"/identities/{ident}").json()["data"]
    assert d["disabled"] is True
    assert clock.parse(d["disabledUntil"]) - clock.parse(d["disabledAt"]) == dt.timedelta(minutes=10)
    assert_error(session.get("/current-identity"), 401, "UNAUTHORIZED")        # its sessions are gone
    assert_error(net.authenticate(user), 401, "INVALID_AUTH")                  # right password, still locked
    clock.advance(9 * 60 + 50)
    assert_error(net.authenticate(user), 401, "INVALID_AUTH")
    clock.advance(11)
    assert net.authenticate(user).status_code == 200
    # the count starts again from zero
    for _ in range(3):
        assert_error(net.authenticate(user, WRONG), 401, "INVALID_AUTH")
    assert net.authenticate(user).status_code == 200


def test_locked_answer_is_the_bad_password_answer(net):
    _, user = net.user(policy=lockout_policy(net, 1, 5))
    bad = net.authenticate(user, WRONG)
    net.authenticate(user, WRONG)                                             # locks
    locked = net.authenticate(user)
    assert locked.status_code == bad.status_code == 401
    assert body_without_request_id(locked) == body_without_request_id(bad)


def test_ten_successful_logins_never_lock(net):
    _, user = net.user(policy=lockout_policy(net, 3, 10))
    for _ in range(10):
        assert net.authenticate(user).status_code == 200


def test_a_good_password_resets_the_count(net):
    _, user = net.user(policy=lockout_policy(net, 3, 10))
    for _ in range(4):
        for _ in range(3):
            assert_error(net.authenticate(user, WRONG), 401, "INVALID_AUTH")
        assert net.authenticate(user).status_code == 200


def test_zero_minutes_locks_until_an_admin_enables(net, admin):
    ident, user = net.user(policy=lockout_policy(net, 2, 0))
    for _ in range(3):
        net.authenticate(user, WRONG)
    d = admin.get(f"/identities/{ident}").json()["data"]
    assert d["disabled"] is True and "disabledUntil" not in d
    clock.advance(365 * 24 * 3600)
    assert_error(net.authenticate(user), 401, "INVALID_AUTH")
    admin = admin.login()                                # the old admin session timed out meanwhile
    assert admin.post(f"/identities/{ident}/enable").status_code == 200
    assert net.authenticate(user).status_code == 200


def test_zero_max_attempts_is_unlimited(net):
    _, user = net.user(policy=lockout_policy(net, 0, 10))
    for _ in range(12):
        assert_error(net.authenticate(user, WRONG), 401, "INVALID_AUTH")
    assert net.authenticate(user).status_code == 200


def test_unknown_user_and_wrong_password_are_identical(net):
    _, user = net.user()
    unknown = net.authenticate("nobody-at-all", PASSWORD)
    wrong = net.authenticate(user, WRONG)
    assert unknown.status_code == wrong.status_code == 401
    assert body_without_request_id(unknown) == body_without_request_id(wrong)
    assert unknown.json()["error"]["requestId"] != wrong.json()["error"]["requestId"]
    assert body_without_request_id(unknown) == {
        "error": {"code": "INVALID_AUTH", "message": "The authentication request failed"},
        "meta": {"apiEnrollmentVersion": "0.0.1", "apiVersion": "0.0.1"}}
    assert "zt-session" not in unknown.headers and "zt-session" not in wrong.headers


def test_updb_not_allowed_refuses_the_right_password(net):
    policy = net.policy(primary={"updb": {"allowed": False}})
    _, user = net.user(policy=policy)
    r = net.authenticate(user)
    assert_error(r, 401, "INVALID_AUTH")
    assert body_without_request_id(r) == body_without_request_id(net.authenticate("nobody-at-all"))


def test_disabled_identity_gets_the_same_answer(net, admin):
    ident, user = net.user()
    admin.post(f"/identities/{ident}/disable", json={"durationMinutes": 0})
    r = net.authenticate(user)
    assert_error(r, 401, "INVALID_AUTH")
    assert body_without_request_id(r) == body_without_request_id(net.authenticate(user, WRONG))


def test_policy_change_applies_to_the_next_login(net, admin):
    policy = net.policy()
    _, user = net.user(policy=policy)
    assert net.authenticate(user).status_code == 200
    admin.patch(f"/auth-policies/{policy}", json={"primary": {"updb": {"allowed": False}}})
    assert_error(net.authenticate(user), 401, "INVALID_AUTH")


def test_check_primary_rules():
    import pytest

    from ziti_lite.auth.policy import check_primary
    from ziti_lite.errors import InvalidAuth
    p = {"primary": {"cert": {"allowed": True, "allowExpiredCerts": False},
                     "extJwt": {"allowed": True, "allowedSigners": ["s1"]},
                     "updb": {"allowed": False}}, "secondary": {}}
    check_primary(p, "cert")
    with pytest.raises(InvalidAuth):
        check_primary(p, "cert", cert_expired=True)
    check_primary(p, "ext-jwt", signer_id="s1")
    with pytest.raises(InvalidAuth):
        check_primary(p, "ext-jwt", signer_id="s2")
    with pytest.raises(InvalidAuth):
        check_primary(p, "password")
    check_primary({"primary": {}, "secondary": {}}, "cert", cert_expired=True)   # defaults: allowed
