"""OpenZiti 2.0's /revocations through the management API, as v2.0.3 answers: create (JTI,
API_SESSION, IDENTITY) with upstream's checks and refusals, detail and list with ``expiresAt``
and ``type``, upstream's filters, the permission, no update or delete, create-or-replace, the
audit row, the revocation an identity's deletion or disabling makes, and expired entries pruned.
What a revocation does to tokens: ``tests/auth/test_oidc_tokens.py``."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from tests.builders import Net
from tests.conftest import MGMT, Api, assert_error
from ziti_lite import clock
from ziti_lite.auth import oidc_tokens

DETAIL = {"_links", "createdAt", "id", "tags", "updatedAt", "expiresAt", "type"}


def _revoke(admin: Api, id: str, kind: str, **extra):
    return admin.post("/revocations", json={"id": id, "type": kind, **extra})


def test_each_type_is_created_and_read_back_as_upstream_answers(admin):
    ident = admin.create("identities", {"name": "rev-target", "type": "User", "isAdmin": False})
    jti, asid = str(uuid.uuid4()), str(uuid.uuid4())
    for id, kind in ((jti, "JTI"), (asid, "API_SESSION"), (ident, "IDENTITY")):
        r = _revoke(admin, id, kind, tags={"why": "test"})
        assert r.status_code == 201, r.text
        assert r.json()["data"] == {"id": id, "_links": {"self": {"href": f"./revocations/{id}"}}}
        d = admin.get(f"/revocations/{id}").json()["data"]
        assert set(d) == DETAIL and d["type"] == kind and d["tags"] == {"why": "test"}
        created, expires = clock.parse(d["createdAt"]), clock.parse(d["expiresAt"])
        # upstream's longest token life, counted from just before the entry is stored
        assert abs(expires - created - dt.timedelta(hours=24)) < dt.timedelta(seconds=1)
    listed = admin.get("/revocations").json()
    assert {x["id"]: x["type"] for x in listed["data"]} == {jti: "JTI", asid: "API_SESSION", ident: "IDENTITY"}
    assert listed["meta"]["filterableFields"] == ["id", "createdAt", "updatedAt", "tags", "isSystem",
                                                  "expiresAt", "type", "issuedBefore"]
    only = admin.get('/revocations?filter=type = "API_SESSION"').json()["data"]
    assert [x["id"] for x in only] == [asid]
    later = clock.fmt(clock.now() + dt.timedelta(hours=23))
    assert len(admin.get(f"/revocations?filter=expiresAt > datetime({later})").json()["data"]) == 3
    assert admin.get("/summary").json()["data"]["revocations"] == 3


def test_a_second_revocation_of_the_same_id_replaces_the_first(admin):
    jti = str(uuid.uuid4())
    assert _revoke(admin, jti, "JTI").status_code == 201
    first = admin.get(f"/revocations/{jti}").json()["data"]
    clock.advance(60)
    r = _revoke(admin, jti, "API_SESSION", tags={"n": 2})
    assert r.status_code == 201, r.text
    second = admin.get(f"/revocations/{jti}").json()["data"]
    assert second["type"] == "API_SESSION" and second["tags"] == {"n": 2}
    assert second["createdAt"] > first["createdAt"] and second["expiresAt"] > first["expiresAt"]
    assert [x["id"] for x in admin.get("/revocations").json()["data"]] == [jti]


@pytest.mark.parametrize("body, field, code", [
    ({"id": "not-a-uuid", "type": "JTI"}, "id", "COULD_NOT_VALIDATE"),
    ({"id": "not-a-uuid", "type": "API_SESSION"}, "id", "COULD_NOT_VALIDATE"),
    ({"id": str(uuid.uuid4()), "type": "TOKEN"}, "type", "COULD_NOT_VALIDATE"),
    ({"id": str(uuid.uuid4())}, "type", "COULD_NOT_VALIDATE"),
    ({"type": "JTI"}, "id", "COULD_NOT_VALIDATE"),
    ({"id": 7, "type": "JTI"}, "id", "COULD_NOT_PARSE_BODY"),
    ({"id": str(uuid.uuid4()), "type": "JTI", "tags": "x"}, "tags", "COULD_NOT_PARSE_BODY"),
])
def test_a_bad_body_is_refused_with_400(admin, body, field, code):
    err = assert_error(admin.post("/revocations", json=body), 400, code)
    assert field in str(err)
    assert admin.get("/revocations").json()["data"] == []


def test_an_unreadable_body_and_an_unknown_identity_are_refused(admin):
    r = admin.post("/revocations", content=b"{nope", headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["error"]["code"]
    assert_error(_revoke(admin, str(uuid.uuid4()), "IDENTITY"), 404, "NOT_FOUND")
    assert_error(admin.get(f"/revocations/{uuid.uuid4()}"), 404, "NOT_FOUND")


def test_upstream_accepts_each_uuid_form_its_parser_takes():
    u = str(uuid.uuid4())
    for good in (u, u.upper(), "{" + u + "}", "urn:uuid:" + u, u.replace("-", "")):
        assert oidc_tokens.is_uuid(good), good
    for bad in ("", u[:-1], u + "0", u.replace("-", "", 1), "g" + u[1:], "{" + u, " " + u):
        assert not oidc_tokens.is_uuid(bad), bad


def test_revocations_are_never_updated_or_deleted(admin):
    jti = str(uuid.uuid4())
    assert _revoke(admin, jti, "JTI").status_code == 201
    for method in ("PUT", "PATCH", "DELETE"):
        r = admin.request(method, f"/revocations/{jti}", json={"id": jti, "type": "JTI"})
        assert r.status_code == 405, (method, r.text)
    assert admin.get(f"/revocations/{jti}").status_code == 200


def test_only_admins_create_and_admin_readonly_reads(admin, anon):
    net = Net(admin)
    ids = {}
    for perms in ([], ["admin_readonly"], ["identity", "ops"]):
        ident, username = net.user()
        assert admin.patch(f"/identities/{ident}", json={"permissions": perms}).status_code == 200
        ids[tuple(perms)] = net.login(username, prefix=MGMT)
    jti = str(uuid.uuid4())
    assert _revoke(admin, jti, "JTI").status_code == 201
    for perms, api in ids.items():
        assert_error(_revoke(api, str(uuid.uuid4()), "JTI"), 401, "UNAUTHORIZED")
        if perms == ("admin_readonly",):
            assert api.get("/revocations").status_code == 200 and api.get(f"/revocations/{jti}").status_code == 200
        else:
            assert_error(api.get("/revocations"), 401, "UNAUTHORIZED")
            assert_error(api.get(f"/revocations/{jti}"), 401, "UNAUTHORIZED")
    assert_error(_revoke(anon, str(uuid.uuid4()), "JTI"), 401, "UNAUTHORIZED")
    assert_error(anon.get("/revocations"), 401, "UNAUTHORIZED")


def test_a_creation_is_audited(admin):
    jti = str(uuid.uuid4())
    assert _revoke(admin, jti, "JTI").status_code == 201
    r = admin.as_prefix("").get(f'/ziti-lite/v1/audit?filter=entityId="{jti}"')
    (row,) = r.json()["data"]
    assert row["operation"] == "createRevocation" and row["entityType"] == "revocations"
    assert row["identityName"] == "Default Admin" and row["changes"]["type"] == {"old": None, "new": "JTI"}


def test_deleting_or_disabling_an_identity_revokes_it(admin):
    gone = admin.create("identities", {"name": "rev-gone", "type": "User", "isAdmin": False})
    off = admin.create("identities", {"name": "rev-off", "type": "User", "isAdmin": False})
    assert admin.delete(f"/identities/{gone}").status_code == 200
    assert admin.post(f"/identities/{off}/disable", json={"durationMinutes": 5}).status_code == 200
    got = {x["id"]: x["type"] for x in admin.get("/revocations").json()["data"]}
    assert got == {gone: "IDENTITY", off: "IDENTITY"}
    # enabling keeps the revocation (its cut-off lets later logins through); another update adds none
    assert admin.post(f"/identities/{off}/enable").status_code == 200
    assert admin.patch(f"/identities/{off}", json={"name": "rev-on"}).status_code == 200
    assert len(admin.get("/revocations").json()["data"]) == 2


def test_expired_revocations_are_pruned(admin, ctl):
    assert _revoke(admin, str(uuid.uuid4()), "JTI").status_code == 201
    clock.advance(24 * 3600 - 5)
    oidc_tokens.prune(ctl)      # what the janitor runs every 5 s
    admin = admin.login()       # the session has timed out meanwhile
    assert len(admin.get("/revocations").json()["data"]) == 1
    clock.advance(10)
    oidc_tokens.prune(ctl)
    assert admin.get("/revocations").json()["data"] == []
