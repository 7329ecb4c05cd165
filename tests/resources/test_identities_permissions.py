"""Identities' ``permissions`` (OpenZiti 2.0's permission model) as stored and served: create,
detail, list, PUT, PATCH, upstream's validation of unknown names, the served spec, and the
network documents (export, import, apply) that carry them."""

from __future__ import annotations

import shutil

import yaml

from tests.builders import Net
from tests.conftest import MGMT, Api, assert_error
from tests.netcode.conftest import export_of, invoke, write
from ziti_lite import permissions


def _identity(admin, name: str, perms=None) -> str:
    body = {"name": name, "type": "User", "isAdmin": False}
    if perms is not None:
        body["permissions"] = perms
    return admin.create("identities", body)


def _perms(admin, id: str):
    return admin.get(f"/identities/{id}").json()["data"]["permissions"]


def test_permissions_are_stored_sorted_without_duplicates_and_read_back(admin):
    # upstream v2.0.3 keeps them as a set: sorted (byte order), each once, whatever order was sent
    id = _identity(admin, "ops-reader", ["service.read", "admin_readonly", "identity", "service.read"])
    assert _perms(admin, id) == ["admin_readonly", "identity", "service.read"]
    listed = admin.get('/identities?filter=name="ops-reader"').json()["data"][0]
    assert listed["permissions"] == ["admin_readonly", "identity", "service.read"]
    # none: null, as upstream's detail (no value kept for an empty list)
    assert _perms(admin, _identity(admin, "plain")) is None
    assert _perms(admin, _identity(admin, "plain-empty", [])) is None


def test_patch_changes_put_replaces(admin):
    id = _identity(admin, "changing", ["config"])
    assert admin.patch(f"/identities/{id}", json={"permissions": ["ops.read", "ca"]}).status_code == 200
    assert _perms(admin, id) == ["ca", "ops.read"]
    assert admin.patch(f"/identities/{id}", json={"name": "changing-2"}).status_code == 200
    assert _perms(admin, id) == ["ca", "ops.read"]   # a PATCH without the field keeps them
    assert admin.patch(f"/identities/{id}", json={"permissions": []}).status_code == 200
    assert _perms(admin, id) is None
    admin.patch(f"/identities/{id}", json={"permissions": ["ca"]})
    r = admin.put(f"/identities/{id}", json={"name": "changing-3", "type": "User", "isAdmin": False})
    assert r.status_code == 200
    assert _perms(admin, id) is None   # a PUT without the field clears them


def test_an_unknown_permission_is_refused_naming_its_index_and_the_allowed_values(admin):
    r = admin.post("/identities", json={"name": "bad", "type": "User", "isAdmin": False,
                                        "permissions": ["service.read", "services"]})
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    cause = r.json()["error"]["cause"]
    assert cause["field"] == "permissions.1" and cause["value"] == "services"
    assert cause["reason"] == ("permissions.1 in body should be one of ["
                               + " ".join(permissions.ALLOWED) + "]")
    assert cause["reason"].startswith("permissions.1 in body should be one of [admin_readonly auth-policy ")
    id = _identity(admin, "good")
    for bad in (["ops.create"], ["admin"], ["controllers"], ["SERVICE"]):
        r = admin.patch(f"/identities/{id}", json={"permissions": bad})
        assert_error(r, 400, "COULD_NOT_VALIDATE")
        assert r.json()["error"]["cause"]["field"] == "permissions.0"
    r = admin.patch(f"/identities/{id}", json={"permissions": "service"})   # not a list
    assert r.status_code == 400 and r.json()["error"]["code"] in ("COULD_NOT_PARSE_BODY", "COULD_NOT_VALIDATE")
    assert _perms(admin, id) is None


def test_the_served_spec_lists_the_permission_names(admin):
    spec = admin.get("/specs/edge-management/spec").json()
    schemas = spec["components"]["schemas"]
    items = schemas["IdentityCreate"]["properties"]["permissions"]["anyOf"][0]["items"]
    assert items["enum"] == list(permissions.ALLOWED)
    assert "permissions" in schemas["IdentityPatch"]["properties"]


def test_export_import_and_apply_carry_permissions(admin, db_path, template_db, tmp_path):
    _identity(admin, "ci-bot", ["identity.create", "enrollment.create"])
    _identity(admin, "nobody-special")
    doc = export_of(db_path)
    by_name = {e["name"]: e for e in doc["identities"]}
    assert by_name["ci-bot"]["permissions"] == ["enrollment.create", "identity.create"]
    assert "permissions" not in by_name["nobody-special"]   # none: the document reads as a v1.x export
    # into a fresh network
    fresh = tmp_path / "fresh.db"
    shutil.copy(template_db, fresh)
    f = write(tmp_path / "net.json", doc)
    assert invoke("import", "--db", fresh, f).exit_code == 0
    again = {e["name"]: e for e in export_of(fresh)["identities"]}
    assert again["ci-bot"]["permissions"] == ["enrollment.create", "identity.create"]
    # apply: a change of permissions is planned field by field and made
    by_name["ci-bot"]["permissions"] = ["identity", "admin_readonly"]
    f = tmp_path / "net.yaml"
    f.write_text(yaml.safe_dump({"identities": [by_name["ci-bot"]]}))
    r = invoke("apply", "--db", fresh, "--dry-run", f)
    assert "~ update identities 'ci-bot'" in r.output and "permissions:" in r.output, r.output
    assert invoke("apply", "--db", fresh, f).exit_code == 0
    assert {e["name"]: e for e in export_of(fresh)["identities"]}["ci-bot"]["permissions"] == [
        "admin_readonly", "identity"]
    # the document's order is not a change (stored sorted, as upstream keeps the set)
    assert "Plan: nothing to do" in invoke("apply", "--db", fresh, f).output


def _delegate(admin, *perms: str) -> Api:
    """A management API logged in as a new identity holding ``perms``."""
    net = Net(admin)
    ident, username = net.user()
    assert admin.patch(f"/identities/{ident}", json={"permissions": list(perms)}).status_code == 200
    return net.login(username, prefix=MGMT)


def _refused(r, reason: str) -> None:
    assert_error(r, 401, "UNAUTHORIZED")
    assert r.json()["error"]["cause"] == {"code": "UNHANDLED", "message": reason}


def test_admin_protection_for_an_identity_manager(admin):
    """A non-admin with the identity permission manages plain identities only, as upstream:
    no admins, no permissions, no PUT, no change to an admin."""
    api = _delegate(admin, "identity")
    plain = api.create("identities", {"name": "made-by-delegate", "type": "Device", "isAdmin": False})
    _refused(api.post("/identities", json={"name": "sneaky-admin", "type": "User", "isAdmin": True}),
             "non-admins may not create admin users")
    _refused(api.post("/identities", json={"name": "sneaky-perms", "type": "User", "isAdmin": False,
                                           "permissions": ["ops"]}),
             "non-admins may not create users with permissions")
    assert api.post("/identities", json={"name": "empty-perms", "type": "User", "isAdmin": False,
                                         "permissions": []}).status_code == 201
    assert api.patch(f"/identities/{plain}", json={"roleAttributes": ["laptops"]}).status_code == 200
    _refused(api.patch(f"/identities/{plain}", json={"permissions": ["service"]}),
             "non-admins may not modify the identity field 'permissions'")
    _refused(api.patch(f"/identities/{plain}", json={"isAdmin": False}),
             "non-admins may not modify the identity field 'isAdmin'")
    _refused(api.put(f"/identities/{plain}", json={"name": "made-by-delegate", "type": "Device", "isAdmin": False}),
             "non-admins may not use the PUT method, use PATCH instead")
    other_admin = admin.create("identities", {"name": "second-admin", "type": "User", "isAdmin": True})
    _refused(api.patch(f"/identities/{other_admin}", json={"roleAttributes": ["x"]}),
             "non-admins may not modify admin identities")
    _refused(api.delete(f"/identities/{other_admin}"), "non-admin may not delete admin identities")
    default_admin = admin.get('/identities?filter=isDefaultAdmin=true').json()["data"][0]["id"]
    _refused(api.delete(f"/identities/{default_admin}"), "non-admin may not delete admin identities")
    assert api.delete(f"/identities/{plain}").status_code == 200
    # nothing of it changed what the refusals were about
    assert admin.get(f"/identities/{other_admin}").json()["data"]["roleAttributes"] is None
    # an admin may do all of it
    assert admin.patch(f"/identities/{other_admin}", json={"permissions": ["ca"]}).status_code == 200


def test_a_permission_change_is_audited_with_its_author(admin, db_path):
    """Granting, changing and removing permissions are changes of the identity like any other:
    each has its audit row naming the caller and the old and new value."""
    id = _identity(admin, "audited-bot")
    admin.patch(f"/identities/{id}", json={"permissions": ["service.read"]})
    admin.patch(f"/identities/{id}", json={"permissions": ["service"]})
    admin.patch(f"/identities/{id}", json={"permissions": []})
    query = f'filter=entityId="{id}" and operation="patchIdentity"&sort=createdAt asc&limit=100'
    rows = admin.as_prefix("").get(f"/ziti-lite/v1/audit?{query}").json()["data"]
    assert [r["changes"] for r in rows] == [
        {"permissions": {"old": None, "new": ["service.read"]}},
        {"permissions": {"old": ["service.read"], "new": ["service"]}},
        {"permissions": {"old": ["service"], "new": None}},
    ]
    assert {(r["identityName"], r["outcome"]) for r in rows} == {("Default Admin", "success")}
    # a refused change leaves the identity as it was and writes no change row
    delegate = _delegate(admin, "identity")
    _refused(delegate.patch(f"/identities/{id}", json={"permissions": ["ops"]}),
             "non-admins may not modify the identity field 'permissions'")
    assert len(admin.as_prefix("").get(f"/ziti-lite/v1/audit?{query}").json()["data"]) == 3


def test_no_way_around_admin_protection_through_enrollments_disabling_or_mfa(admin):
    """An identity manager cannot give itself an admin's credentials: an admin identity's
    enrollment is for admins to create, read, refresh, delete or list (as upstream v2.0.3, with
    its words); beyond upstream, it cannot lock an admin out either (disable, MFA removal)."""
    api = _delegate(admin, "identity", "enrollment")
    target = admin.create("identities", {"name": "protected-admin", "type": "User", "isAdmin": True})
    _refused(api.post("/enrollments", json={"method": "ott", "identityId": target,
                                            "expiresAt": "2099-01-01T00:00:00Z"}),
             "non-admins may not manage enrollments for admin identities")
    enr = admin.create("enrollments", {"method": "ott", "identityId": target, "expiresAt": "2099-01-01T00:00:00Z"})
    _refused(api.post(f"/enrollments/{enr}/refresh", json={"expiresAt": "2099-02-01T00:00:00Z"}),
             "non-admins may not manage enrollments for admin identities")
    _refused(api.get(f"/enrollments/{enr}"), "non-admins may not manage enrollments for admin identities")
    _refused(api.delete(f"/enrollments/{enr}"), "non-admins may not manage enrollments for admin identities")
    assert admin.get(f"/enrollments/{enr}").status_code == 200   # still there
    # the list leaves an admin's enrollments out for a non-admin (admin_readonly too), not for an admin
    viewer = _delegate(admin, "admin_readonly")
    query = f'/enrollments?filter=identity="{target}"'
    for caller in (api, viewer):
        assert caller.get(query).json()["meta"]["pagination"]["totalCount"] == 0
        _refused(caller.get(f"/enrollments/{enr}"), "non-admins may not manage enrollments for admin identities")
    assert admin.get(query).json()["meta"]["pagination"]["totalCount"] == 1
    # beyond upstream v2.0.3: nor do an admin's detail and its enrollments list show them to a non-admin
    for caller in (api, viewer):
        assert caller.get(f"/identities/{target}").json()["data"]["enrollment"] == {}
        assert caller.get(f'/identities?filter=id="{target}"').json()["data"][0]["enrollment"] == {}
        listed = caller.get(f"/identities/{target}/enrollments").json()
        assert listed["data"] == [] and listed["meta"]["pagination"]["totalCount"] == 0
    assert admin.get(f"/identities/{target}").json()["data"]["enrollment"]["ott"]["id"] == enr
    assert admin.get(f"/identities/{target}/enrollments").json()["meta"]["pagination"]["totalCount"] == 1
    _refused(api.post(f"/identities/{target}/disable", json={"durationMinutes": 0}),
             "non-admins may not disable admin identities")
    # tracing an admin takes nothing over and locks nobody out: allowed, as upstream v2.0.3
    assert api.put(f"/identities/{target}/trace", json={"enabled": True}).status_code == 200
    _refused(api.delete(f"/identities/{target}/mfa"), "non-admins may not remove the MFA of admin identities")
    assert admin.get(f"/identities/{target}").json()["data"]["disabled"] is False
    # the same operations on an identity that is no admin are the delegate's to make
    plain = api.create("identities", {"name": "plain-device", "type": "Device", "isAdmin": False})
    r = api.post("/enrollments", json={"method": "ott", "identityId": plain, "expiresAt": "2099-01-01T00:00:00Z"})
    assert r.status_code == 201
    assert api.get(f"/enrollments/{r.json()['data']['id']}").status_code == 200
    assert api.get(f"/identities/{plain}").json()["data"]["enrollment"]["ott"]["token"]
    assert api.get(f"/identities/{plain}/enrollments").json()["meta"]["pagination"]["totalCount"] == 1
    assert api.get(f'/enrollments?filter=identity="{plain}"').json()["meta"]["pagination"]["totalCount"] == 1
    # a router's enrollment (no identity) stays listed
    er = admin.create("edge-routers", {"name": "listed-er"})
    assert api.get(f'/enrollments?filter=edgeRouter="{er}"').json()["meta"]["pagination"]["totalCount"] == 1
    assert api.post(f"/identities/{plain}/disable", json={"durationMinutes": 0}).status_code == 200
