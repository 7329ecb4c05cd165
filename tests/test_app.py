"""What ziti-lite says about itself and the smaller hardening items, through the HTTP API."""

from __future__ import annotations

import datetime as dt
import logging
import platform

import pytest

from tests.conftest import ADMIN_USER, CLIENT, MGMT, Api, assert_error
from ziti_lite import UPSTREAM_VERSION, __version__, clock
from ziti_lite.app import create_app
from ziti_lite.config import Settings


@pytest.mark.parametrize("path", ["/version", MGMT + "/version", CLIENT + "/version", "/"])
def test_version_reports_the_upstream_controller_version(client, path):
    r = client.get(path)
    v = r.json()["data"]
    assert v["version"] == f"v{UPSTREAM_VERSION}" == "v2.0.3"   # the 2.0 line it serves
    # ziti-lite's own version goes where upstream puts build details
    assert __version__ in v["revision"]
    assert v["runtimeVersion"] == f"ziti-lite {__version__} (Python {platform.python_version()})"
    assert r.headers["server"] == "ziti-controller/v2.0.3"


def test_repeated_query_parameters_take_the_first_value(admin):
    for name in ("first", "second"):
        admin.create("identities", {"name": name, "type": "User", "isAdmin": False})
    r = admin.get('/identities?filter=name="first"&filter=name="second"&limit=3&limit=1')
    assert [i["name"] for i in r.json()["data"]] == ["first"]
    assert r.json()["meta"]["pagination"]["limit"] == 3


def test_validation_errors_never_echo_a_password(admin):
    iid = admin.create("identities", {"name": "pw", "type": "User", "isAdmin": False})
    secret = "x"  # too short: a validation error on the password field
    body = {"method": "updb", "identityId": iid, "username": "pw-user", "password": secret}
    err = assert_error(admin.post("/authenticators", json=body), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "password"
    assert err["cause"]["value"] == "<redacted>"
    # a password of the wrong JSON type: COULD_NOT_PARSE_BODY (as upstream), the value not echoed
    r = admin.post("/authenticators", json={**body, "password": 123456789})
    assert_error(r, 400, "COULD_NOT_PARSE_BODY")
    assert "123456789" not in r.text
    r = admin.client.post(
        CLIENT + "/authenticate?method=password", json={"username": "a", "password": ["hunter2-secret"]}
    )
    assert r.status_code == 400 and "hunter2-secret" not in r.text


def test_cert_pem_on_a_password_authenticator_is_not_stored(admin, ctl):
    iid = admin.create("identities", {"name": "updb-pem", "type": "User", "isAdmin": False})
    pem = ctl.state["root_cert"]
    aid = admin.create(
        "authenticators",
        {"method": "updb", "identityId": iid, "username": "updb-pem-user", "password": "Passw0rd-1", "certPem": pem},
    )
    assert ctl.store.value("SELECT cert_pem FROM authenticators WHERE id = ?", (aid,)) is None
    assert "certPem" not in admin.get(f"/authenticators/{aid}").json()["data"]


def test_admin_password_on_an_existing_database_is_reported(db_path, caplog):
    caplog.set_level(logging.WARNING, logger="ziti_lite")
    app = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password="Some-other-pw1"))
    app.state.controller.store.close()
    assert "admin password given" in caplog.text and "ignored" in caplog.text
    assert "Some-other-pw1" not in caplog.text


def test_enrollment_refresh_validates_the_body_before_the_lookup(admin):
    past = clock.fmt(clock.now() - dt.timedelta(minutes=5))
    assert_error(admin.post("/enrollments/missing/refresh", json={}), 400, "COULD_NOT_VALIDATE")
    assert_error(admin.post("/enrollments/missing/refresh", json={"expiresAt": past}), 400, "COULD_NOT_VALIDATE")
    future = clock.fmt(clock.now() + dt.timedelta(minutes=5))
    assert_error(admin.post("/enrollments/missing/refresh", json={"expiresAt": future}), 404, "NOT_FOUND")


def test_auth_policies_list_needs_an_admin(admin):
    iid = admin.create("identities", {"name": "plain", "type": "User", "isAdmin": False})
    admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "plain-u", "password": "Plain-pw1"}
    )
    user = Api(admin.client, MGMT).login("plain-u", "Plain-pw1")
    assert_error(user.get("/auth-policies"), 401, "UNAUTHORIZED")
    assert_error(user.as_prefix(CLIENT).get("/auth-policies"), 404, "NOT_FOUND")
