"""Enrollments (create, detail, refresh, delete), identity sub-lists and /controllers."""

from __future__ import annotations

import datetime as dt

from tests.api.test_cas import ca_body, user  # noqa: F401  (fixture)
from tests.conftest import CLIENT, assert_error
from ziti_lite import clock
from ziti_lite.pki import tokens


def later(minutes: int = 60) -> str:
    return clock.fmt(clock.now() + dt.timedelta(minutes=minutes))


def identity(admin, name: str, **extra) -> str:
    return admin.create("identities", {"name": name, "type": "User", "isAdmin": False, **extra})


def test_create_ott_and_detail(admin, ctl):
    iid = identity(admin, "enr-ott")
    expires = later(90)
    r = admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": expires})
    assert r.status_code == 201, r.text
    id = r.json()["data"]["id"]
    assert r.json() == {"data": {"id": id, "_links": {"self": {"href": f"./enrollments/{id}"}}}, "meta": {}}
    d = admin.get(f"/enrollments/{id}").json()["data"]
    assert d["method"] == "ott" and d["identityId"] == iid and d["expiresAt"] == expires
    assert d["identity"] == {"entity": "identities", "id": iid, "name": "enr-ott",
                             "_links": {"self": {"href": f"./identities/{iid}"}}}
    for absent in ("edgeRouterId", "edgeRouter", "transitRouterId", "transitRouter", "caId", "ca", "username"):
        assert absent not in d, absent
    claims = tokens.verify_enrollment_jwt(d["jwt"], ctl.state["server_cert"])
    assert claims["jti"] == d["token"] and claims["sub"] == iid and claims["em"] == "ott"
    assert claims["exp"] == int(clock.parse(expires).timestamp())
    summary = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]
    assert summary["ott"]["id"] == id and summary["ott"]["jwt"] == d["jwt"]


def test_ottca_and_updb(admin):
    ca = admin.create("cas", ca_body("enr-ca"))
    iid = identity(admin, "enr-multi")
    e1 = admin.create("enrollments", {"method": "ottca", "identityId": iid, "expiresAt": later(), "caId": ca})
    e2 = admin.create("enrollments", {"method": "updb", "identityId": iid, "expiresAt": later(),
                                      "username": "multi-user", "caId": ca})
    d1 = admin.get(f"/enrollments/{e1}").json()["data"]
    assert d1["caId"] == ca and d1["ca"]["name"] == "enr-ca"
    d2 = admin.get(f"/enrollments/{e2}").json()["data"]
    assert d2["username"] == "multi-user" and "caId" not in d2
    listed = admin.get("/enrollments", params={"filter": f'identity = "{iid}" and caId = "{ca}"'}).json()
    assert [x["id"] for x in listed["data"]] == [e1]
    assert set(admin.get(f"/identities/{iid}").json()["data"]["enrollment"]) == {"ottca", "updb"}


def test_create_validation(admin):
    iid = identity(admin, "enr-bad")

    def post(**kw):
        return admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": later(), **kw})

    err = assert_error(post(identityId="nobody"), 400, "REFERENCED_ENTITY_NOT_FOUND")
    assert err["cause"]["field"] == "identityId"
    err = assert_error(
        post(expiresAt=clock.fmt(clock.now() - dt.timedelta(minutes=1))), 400, "REFERENCED_ENTITY_NOT_FOUND"
    )
    assert err["cause"]["field"] == "expiresAt"
    err = assert_error(post(method="ottca"), 400, "REFERENCED_ENTITY_NOT_FOUND")
    assert err["cause"]["field"] == "caId"
    err = assert_error(post(method="ottca", caId="noSuchCa"), 400, "REFERENCED_ENTITY_NOT_FOUND")
    assert err["cause"]["field"] == "caId"
    err = assert_error(post(method="updb"), 400, "REFERENCED_ENTITY_NOT_FOUND")
    assert err["cause"]["field"] == "username"
    err = assert_error(post(method="erott"), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "method"
    err = assert_error(admin.post("/enrollments", json={"method": "ott", "identityId": iid}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "expiresAt"
    err = assert_error(post(expiresAt="tomorrow"), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "expiresAt"
    assert admin.get(f"/identities/{iid}").json()["data"]["enrollment"] == {}


def test_duplicate_method_is_409(admin):
    iid = identity(admin, "enr-dup", enrollment={"ott": True})
    err = assert_error(
        admin.post("/enrollments", json={"method": "ott", "identityId": iid, "expiresAt": later()}),
        409,
        "ENROLLMENT_EXISTS",
    )
    assert err["cause"] == {"field": "method", "value": "ott", "reason": "enrollment of same method exists"}
    # another method is fine
    admin.create("enrollments", {"method": "updb", "identityId": iid, "expiresAt": later(), "username": "dup-u"})


def test_refresh(admin, ctl):
    iid = identity(admin, "enr-refresh", enrollment={"ott": True})
    id = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]
    before = admin.get(f"/enrollments/{id}").json()["data"]
    expires = later(600)
    r = admin.post(f"/enrollments/{id}/refresh", json={"expiresAt": expires})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}, r.text
    after = admin.get(f"/enrollments/{id}").json()["data"]
    assert after["token"] != before["token"] and after["jwt"] != before["jwt"]
    assert after["expiresAt"] == expires
    claims = tokens.verify_enrollment_jwt(after["jwt"], ctl.state["server_cert"])
    assert claims["jti"] == after["token"], "the refreshed JWT carries the new token"
    assert claims["exp"] == int(clock.parse(expires).timestamp()) and claims["sub"] == iid
    err = assert_error(
        admin.post(f"/enrollments/{id}/refresh", json={"expiresAt": "2001-01-01T00:00:00.000Z"}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"] == "expiresAt"
    assert_error(admin.post(f"/enrollments/{id}/refresh", json={}), 400, "COULD_NOT_VALIDATE")
    assert_error(admin.post("/enrollments/noSuchId/refresh", json={"expiresAt": expires}), 404, "NOT_FOUND")


def test_delete(admin):
    iid = identity(admin, "enr-del", enrollment={"ott": True})
    id = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]
    assert admin.delete(f"/enrollments/{id}").status_code == 200
    assert_error(admin.get(f"/enrollments/{id}"), 404, "NOT_FOUND")
    assert admin.get(f"/identities/{iid}").json()["data"]["enrollment"] == {}
    # the method can be enrolled again once the old one is gone
    admin.create("enrollments", {"method": "ott", "identityId": iid, "expiresAt": later()})


def test_identity_sub_lists(admin):
    iid = identity(admin, "enr-subs", enrollment={"ott": True})
    other = identity(admin, "enr-other", enrollment={"ott": True})
    admin.create("enrollments", {"method": "updb", "identityId": iid, "expiresAt": later(), "username": "subs-u"})
    admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "subs-login", "password": "Subs-pw-1"}
    )
    admin.create(
        "authenticators", {"method": "updb", "identityId": other, "username": "other-login", "password": "Subs-pw-1"}
    )
    body = admin.get(f"/identities/{iid}/enrollments").json()
    assert {x["method"] for x in body["data"]} == {"ott", "updb"}
    assert body["meta"]["pagination"]["totalCount"] == 2 and "filterableFields" in body["meta"]
    body = admin.get(f"/identities/{iid}/enrollments", params={"filter": 'method = "updb"'}).json()
    assert [x["method"] for x in body["data"]] == ["updb"]
    body = admin.get(f"/identities/{iid}/authenticators").json()
    assert [x["username"] for x in body["data"]] == ["subs-login"]
    assert body["data"][0]["identity"]["id"] == iid
    body = admin.get(f"/identities/{iid}/authenticators?limit=1&offset=1").json()
    assert body["data"] == [] and body["meta"]["pagination"] == {"limit": 1, "offset": 1, "totalCount": 1}
    assert_error(admin.get("/identities/nobody/enrollments"), 404, "NOT_FOUND")
    assert_error(admin.get("/identities/nobody/authenticators"), 404, "NOT_FOUND")
    assert_error(admin.get(f"/identities/{iid}/authenticators", params={"filter": "nope ="}), 400, "INVALID_FILTER")


def test_non_admin_refused(admin, user, anon):  # noqa: F811
    iid = identity(admin, "enr-guard", enrollment={"ott": True})
    id = admin.get(f"/identities/{iid}").json()["data"]["enrollment"]["ott"]["id"]
    body = {"method": "updb", "identityId": iid, "expiresAt": later(), "username": "guard-u"}
    for api in (user, anon):
        assert_error(api.get("/enrollments"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/enrollments/{id}"), 401, "UNAUTHORIZED")
        assert_error(api.post("/enrollments", json=body), 401, "UNAUTHORIZED")
        assert_error(api.post(f"/enrollments/{id}/refresh", json={"expiresAt": later()}), 401, "UNAUTHORIZED")
        assert_error(api.delete(f"/enrollments/{id}"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/identities/{iid}/enrollments"), 401, "UNAUTHORIZED")
        assert_error(api.get(f"/identities/{iid}/authenticators"), 401, "UNAUTHORIZED")


def test_controllers_is_an_empty_list_for_any_session(admin, user, anon):  # noqa: F811
    for api in (admin, user, user.as_prefix(CLIENT)):
        r = api.get("/controllers")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["data"] == []
        assert body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 0}
        assert {"id", "name", "isOnline", "fingerprint"} <= set(body["meta"]["filterableFields"])
    assert admin.get("/controllers", params={"filter": "isOnline = true"}).json()["data"] == []
    assert_error(anon.get("/controllers"), 401, "UNAUTHORIZED")
    assert_error(anon.as_prefix(CLIENT).get("/controllers"), 401, "UNAUTHORIZED")
