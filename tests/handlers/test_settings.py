"""``/controller-settings``: declared by OpenZiti 2.0's spec and not implemented by v2.0.3, whose
seven operations answer go-swagger's 501 (a bare JSON string) to a session, 401 without one."""

from __future__ import annotations

import pytest

from tests.conftest import Api, assert_error


@pytest.fixture
def user(admin) -> Api:
    """A logged-in identity that is no admin and holds no permission."""
    iid = admin.create("identities", {"name": "settings-user", "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": "settings-user",
                                    "password": "Plain-pw1"})
    return Api(admin.client, admin.prefix).login("settings-user", "Plain-pw1")

OPERATIONS = [
    ("GET", "/controller-settings", None, "settings.ListControllerSettings"),
    ("POST", "/controller-settings", {"controllerId": "c1", "oidc": {"redirectUris": ["https://a.test/cb"]}},
     "settings.CreateControllerSetting"),
    ("GET", "/controller-settings/global", None, "settings.DetailControllerSetting"),
    ("GET", "/controller-settings/global/effective", None, "settings.DetailControllerSettingEffective"),
    ("PUT", "/controller-settings/global/effective", {"oidc": {"postLogoutUris": []}},
     "settings.UpdateControllerSetting"),
    ("PATCH", "/controller-settings/global/effective", {"tags": {"a": 1}}, "settings.PatchControllerSetting"),
    ("DELETE", "/controller-settings/global/effective", None, "settings.DeleteControllerSetting"),
]


@pytest.mark.parametrize(("method", "path", "body", "name"), OPERATIONS, ids=[o[3] for o in OPERATIONS])
def test_each_operation_answers_501_to_a_session_and_401_without(admin, user, anon, method, path, body, name):
    for api in (admin, user):      # upstream registers no handler: no permission is checked either
        r = api.request(method, path, json=body)
        assert r.status_code == 501, r.text
        assert r.json() == f"operation {name} has not yet been implemented"
    assert_error(anon.request(method, path, json=body), 401, "UNAUTHORIZED")


def test_a_body_is_validated_before_the_501(admin):
    r = admin.request("POST", "/controller-settings", json={"oidc": {}})
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    assert r.json()["error"]["cause"]["field"] == "controllerId"
    # a value of the wrong JSON type is upstream's unmarshalling error
    assert_error(admin.request("PATCH", "/controller-settings/x/effective", json={"oidc": {"redirectUris": 7}}),
                 400, "COULD_NOT_PARSE_BODY")


@pytest.mark.parametrize(("method", "path"), [("POST", "/controller-settings"),
                                             ("PUT", "/controller-settings/x/effective"),
                                             ("PATCH", "/controller-settings/x/effective")])
def test_a_write_without_a_body_is_a_400_naming_it(admin, method, path):
    """Upstream answers HTTP 602 with this cause (a bug: README, Documented differences)."""
    r = admin.request(method, path)
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    assert r.json()["error"]["cause"] == {"field": "controllerSetting", "value": "",
                                          "reason": "controllerSetting in body is required"}


def test_the_operations_are_in_the_served_spec(admin):
    doc = admin.client.get("/edge/management/v1/specs/edge-management/spec").json()
    ops = {(m.upper(), p): item["operationId"] for p, methods in doc["paths"].items() for m, item in methods.items()
           if p.startswith("/controller-settings")}
    # upstream's operationId is go-swagger's name without its package, first letter lowered
    assert ops == {(m, p.replace("global", "{id}")): n.split(".")[1][0].lower() + n.split(".")[1][1:]
                   for m, p, _, n in OPERATIONS}
