"""Identities: PUT/PATCH semantics, disable/enable, the default admin, externalId, hosting maps."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ADMIN_USER, Api, assert_error
from ziti_lite import clock


def get(admin: Api, id: str) -> dict:
    r = admin.get(f"/identities/{id}")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def with_password(admin: Api, name: str, password: str = "Secret-pw1") -> str:
    iid = admin.create("identities", {"name": name, "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": name, "password": password})
    return iid


def login(admin: Api, username: str, password: str = "Secret-pw1"):
    return admin.client.post(admin.prefix + "/authenticate?method=password",
                             json={"username": username, "password": password})


@pytest.fixture
def service_ids(admin):
    return [admin.create("services", {"name": f"host-svc-{i}", "encryptionRequired": True}) for i in range(2)]


FULL = {
    "name": "full", "type": "Device", "isAdmin": True, "roleAttributes": ["a", "b"], "externalId": "ext-1",
    "appData": {"k": "v", "n": 1}, "defaultHostingCost": 12, "defaultHostingPrecedence": "required",
    "tags": {"t": "1"},
}


# ------------------------------------------------------------------ create and detail
def test_create_defaults(admin):
    iid = admin.create("identities", {"name": "bare", "type": "User", "isAdmin": False})
    d = get(admin, iid)
    assert d["typeId"] == "Default"
    assert d["type"] == {"entity": "identity-types", "id": "Default", "name": "Default",
                         "_links": {"self": {"href": "./identity-types/Default"}}}
    assert d["authPolicyId"] == "default" and d["authPolicy"]["id"] == "default"
    assert d["_links"]["auth-policies"] == {"href": "./auth-policies/default"}
    # null: upstream's storage keeps no empty list
    assert d["roleAttributes"] is None and d["tags"] == {} and d["appData"] == {}
    assert d["externalId"] is None
    assert d["defaultHostingCost"] == 0 and d["defaultHostingPrecedence"] == "default"
    assert d["serviceHostingCosts"] == {} and d["serviceHostingPrecedences"] == {}
    assert d["disabled"] is False and "disabledAt" not in d and "disabledUntil" not in d
    assert d["isAdmin"] is False and d["isDefaultAdmin"] is False and d["isMfaEnabled"] is False
    assert d["hasApiSession"] is False and d["hasEdgeRouterConnection"] is False
    assert d["edgeRouterConnectionStatus"] == "offline"
    assert d["authenticators"] == {} and d["enrollment"] == {}
    assert d["envInfo"] == {} and d["sdkInfo"] == {}
    for rel in ("edge-router-policies", "edge-routers", "service-policies", "services", "posture-data",
                "failed-service-requests", "authenticators", "enrollments", "service-configs"):
        assert d["_links"][rel] == {"href": f"./identities/{iid}/{rel}"}


@pytest.mark.parametrize("sent", ["User", "Device", "Service", "Default"])
def test_every_type_is_stored_as_default(admin, sent):
    iid = admin.create("identities", {"name": f"t-{sent}", "type": sent, "isAdmin": False})
    assert get(admin, iid)["typeId"] == "Default"


def test_router_type_is_created_as_upstream_creates_it(admin):
    # upstream creates every identity as Default, whatever type the body names (201)
    iid = admin.create("identities", {"name": "r", "type": "Router", "isAdmin": False})
    assert get(admin, iid)["typeId"] == "Default" and get(admin, iid)["type"]["name"] == "Default"
    assert admin.delete(f"/identities/{iid}").status_code == 200


def test_required_fields(admin):
    for missing in ("name", "type", "isAdmin"):
        body = {"name": "x", "type": "User", "isAdmin": False}
        del body[missing]
        err = assert_error(admin.post("/identities", json=body), 400, "COULD_NOT_VALIDATE")
        assert err["cause"] == {"field": missing, "reason": f"{missing} in body is required", "value": "<nil>"}


def test_duplicate_and_empty_names(admin):
    admin.create("identities", {"name": "dup", "type": "User", "isAdmin": False})
    err = assert_error(admin.post("/identities", json={"name": "dup", "type": "User", "isAdmin": False}),
                       400, "COULD_NOT_VALIDATE")
    assert err["cause"] == {"field": "name", "reason": "name must be unique", "value": "dup"}
    admin.create("identities", {"name": "Dup", "type": "User", "isAdmin": False})  # case-sensitive
    assert_error(
        admin.post("/identities", json={"name": "", "type": "User", "isAdmin": False}), 400, "COULD_NOT_VALIDATE"
    )


def test_role_attribute_prefixes_refused(admin):
    for bad in ("#web", "@id"):
        err = assert_error(
            admin.post("/identities", json={"name": "r", "type": "User", "isAdmin": False, "roleAttributes": [bad]}),
            400,
            "COULD_NOT_VALIDATE",
        )
        assert err["cause"]["field"] == "roleAttributes"


def test_unknown_auth_policy_is_404(admin):
    assert_error(
        admin.post("/identities", json={"name": "p", "type": "User", "isAdmin": False, "authPolicyId": "nope"}),
        404,
        "NOT_FOUND",
    )


def test_cost_limits(admin):
    for bad in (-1, 65536):
        err = assert_error(
            admin.post("/identities", json={"name": "c", "type": "User", "isAdmin": False, "defaultHostingCost": bad}),
            400,
            "COULD_NOT_VALIDATE",
        )
        assert err["cause"]["field"] == "defaultHostingCost"


# ------------------------------------------------------------------ PUT and PATCH
def test_put_resets_omitted_fields(admin, service_ids):
    iid = admin.create(
        "identities",
        {**FULL, "serviceHostingCosts": {service_ids[0]: 3}, "serviceHostingPrecedences": {service_ids[0]: "failed"}},
    )
    d = get(admin, iid)
    assert d["isAdmin"] is True and d["externalId"] == "ext-1" and d["serviceHostingCosts"] == {service_ids[0]: 3}
    r = admin.put(f"/identities/{iid}", json={"name": "full2", "type": "User", "isAdmin": False})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = get(admin, iid)
    assert d["name"] == "full2" and d["isAdmin"] is False
    # null: upstream's storage keeps no empty list
    assert d["roleAttributes"] is None and d["tags"] == {} and d["appData"] == {}
    assert d["externalId"] is None and d["authPolicyId"] == "default"
    assert d["defaultHostingCost"] == 0 and d["defaultHostingPrecedence"] == "default"
    assert d["serviceHostingCosts"] == {} and d["serviceHostingPrecedences"] == {}


def test_put_requires_the_required_fields(admin):
    iid = admin.create("identities", {"name": "p", "type": "User", "isAdmin": False})
    err = assert_error(admin.put(f"/identities/{iid}", json={"name": "p"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] in ("type", "isAdmin")


def test_patch_writes_only_sent_fields(admin):
    iid = admin.create("identities", FULL)
    before = get(admin, iid)
    assert admin.patch(f"/identities/{iid}", json={"defaultHostingCost": 3}).status_code == 200
    after = get(admin, iid)
    assert after["defaultHostingCost"] == 3
    for k in ("name", "isAdmin", "roleAttributes", "externalId", "appData", "tags", "defaultHostingPrecedence"):
        assert after[k] == before[k], k
    assert after["updatedAt"] >= before["updatedAt"]


def test_patch_null_is_ignored_and_empty_values_count(admin):
    iid = admin.create("identities", FULL)
    r = admin.patch(
        f"/identities/{iid}", json={"name": None, "externalId": None, "roleAttributes": None, "isAdmin": None}
    )
    assert r.status_code == 200, r.text
    d = get(admin, iid)
    assert (
        d["name"] == "full"
        and d["externalId"] == "ext-1"
        and d["roleAttributes"] == ["a", "b"]
        and d["isAdmin"] is True
    )
    assert admin.patch(f"/identities/{iid}", json={"roleAttributes": [], "isAdmin": False}).status_code == 200
    d = get(admin, iid)
    assert d["roleAttributes"] is None and d["isAdmin"] is False  # null: upstream's storage keeps no empty list


def test_patch_maps_are_replaced_whole(admin):
    iid = admin.create("identities", FULL)
    assert admin.patch(f"/identities/{iid}", json={"appData": {"only": True}, "tags": {"c": "3"}}).status_code == 200
    d = get(admin, iid)
    assert d["appData"] == {"only": True} and d["tags"] == {"c": "3"}
    assert admin.patch(f"/identities/{iid}", json={"tags": {}}).status_code == 200
    assert get(admin, iid)["tags"] == {"c": "3"}


def test_the_type_as_upstream_writes_it_and_a_router_identity_kept(admin):
    iid = admin.create("identities", {"name": "p", "type": "User", "isAdmin": False})
    # as upstream: a PATCH leaves the type alone, a PUT may not make an identity a router's
    assert admin.patch(f"/identities/{iid}", json={"type": "Router"}).status_code == 200
    assert get(admin, iid)["typeId"] == "Default"
    err = assert_error(admin.put(f"/identities/{iid}", json={"name": "p", "type": "Router", "isAdmin": False}),
                       400, "COULD_NOT_VALIDATE")
    assert err["cause"] == {"field": "typeId", "reason": "may not change type to router", "value": "Router"}
    # a tunneler-enabled router's identity keeps its type and its name
    rid = admin.create("edge-routers", {"name": "tun", "isTunnelerEnabled": True})
    assert get(admin, rid)["typeId"] == "Router"
    assert admin.patch(f"/identities/{rid}", json={"type": "User", "tags": {"a": "b"}}).status_code == 200
    assert get(admin, rid)["typeId"] == "Router"
    err = assert_error(admin.put(f"/identities/{rid}", json={"name": "tun", "type": "User", "isAdmin": False}),
                       400, "COULD_NOT_VALIDATE")
    assert err["cause"] == {"field": "typeId", "reason": "may not change type of router identities", "value": "Default"}
    err = assert_error(admin.patch(f"/identities/{rid}", json={"name": "other"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["reason"] == "may not change name of router identities"
    assert admin.put(f"/identities/{rid}", json={"name": "tun", "type": "Router", "isAdmin": False}).status_code == 200
    assert admin.delete(f"/identities/{iid}").status_code == 200   # no router of that id holds it


def test_rename_to_taken_name_is_400(admin):
    admin.create("identities", {"name": "taken", "type": "User", "isAdmin": False})
    iid = admin.create("identities", {"name": "mine", "type": "User", "isAdmin": False})
    for method in ("put", "patch"):
        r = getattr(admin, method)(f"/identities/{iid}", json={"name": "taken", "type": "User", "isAdmin": False})
        err = assert_error(r, 400, "COULD_NOT_VALIDATE")
        assert err["cause"]["field"] == "name"
        r = getattr(admin, method)(f"/identities/{iid}", json={"name": "", "type": "User", "isAdmin": False})
        assert_error(r, 400, "COULD_NOT_VALIDATE")
    assert get(admin, iid)["name"] == "mine"


def test_is_default_admin_cannot_be_set(admin):
    iid = admin.create("identities", {"name": "sneaky", "type": "User", "isAdmin": False, "isDefaultAdmin": True})
    assert get(admin, iid)["isDefaultAdmin"] is False
    admin.patch(f"/identities/{iid}", json={"isDefaultAdmin": True})
    assert get(admin, iid)["isDefaultAdmin"] is False


# ------------------------------------------------------------------ disable / enable
def test_disable_for_a_duration_then_it_lapses(admin):
    iid = with_password(admin, "temp-off")
    assert login(admin, "temp-off").status_code == 200
    r = admin.post(f"/identities/{iid}/disable", json={"durationMinutes": 10})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = get(admin, iid)
    assert d["disabled"] is True and d["disabledAt"] and d["disabledUntil"] > d["disabledAt"]
    assert d["hasApiSession"] is False, "disabling removes the identity's API sessions"
    assert_error(login(admin, "temp-off"), 401, "INVALID_AUTH")
    # upstream's identity store has no disabled symbol: the filter is refused
    assert admin.get("/identities", params={"filter": "disabled = true"}).status_code == 400
    clock.advance(11 * 60)
    assert get(admin, iid)["disabled"] is False
    assert admin.get(f"/identities/{iid}").json()["data"]["disabled"] is False
    assert login(admin, "temp-off").status_code == 200


def test_disable_without_duration_lasts_until_enable(admin):
    iid = with_password(admin, "long-off")
    r = login(admin, "long-off")
    token = r.json()["data"]["token"]
    assert admin.post(f"/identities/{iid}/disable", json={"durationMinutes": 0}).status_code == 200
    d = get(admin, iid)
    assert d["disabled"] is True and "disabledUntil" not in d
    user = Api(admin.client, admin.prefix, token)
    assert_error(user.get("/current-identity"), 401, "UNAUTHORIZED")
    clock.advance(24 * 3600)
    admin = admin.login()  # the admin's own session idled out over the day
    assert get(admin, iid)["disabled"] is True
    assert_error(login(admin, "long-off"), 401, "INVALID_AUTH")
    assert admin.post(f"/identities/{iid}/enable").status_code == 200
    d = get(admin, iid)
    assert d["disabled"] is False and "disabledAt" not in d
    assert login(admin, "long-off").status_code == 200


def test_disable_validation_and_404(admin):
    iid = admin.create("identities", {"name": "d", "type": "User", "isAdmin": False})
    err = assert_error(admin.post(f"/identities/{iid}/disable", json={}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "durationMinutes"
    assert_error(admin.post("/identities/nope/disable", json={"durationMinutes": 1}), 404, "NOT_FOUND")
    assert_error(admin.post("/identities/nope/enable"), 404, "NOT_FOUND")


def test_disable_is_admin_only(admin):
    iid = with_password(admin, "plainuser")
    user = admin.login("plainuser", "Secret-pw1")
    assert_error(user.post(f"/identities/{iid}/disable", json={"durationMinutes": 1}), 401, "UNAUTHORIZED")
    assert_error(user.post(f"/identities/{iid}/enable"), 401, "UNAUTHORIZED")


# ------------------------------------------------------------------ the default admin
def test_default_admin_cannot_be_deleted(admin):
    rows = admin.get("/identities", params={"filter": "isDefaultAdmin = true"}).json()["data"]
    assert len(rows) == 1
    d = rows[0]
    assert d["isAdmin"] is True and d["authenticators"]["updb"]["username"] == ADMIN_USER
    err = assert_error(admin.delete(f"/identities/{d['id']}"), 400, "ENTITY_CAN_NOT_BE_DELETED")
    assert err["message"] == "The entity requested for delete can not be deleted"
    assert get(admin, d["id"])["isDefaultAdmin"] is True


def test_current_identity_is_the_default_admin(admin):
    r = admin.get("/current-identity")
    assert r.status_code == 200
    d = r.json()["data"]
    assert d["isDefaultAdmin"] is True and d["hasApiSession"] is True
    assert d["_links"] == {"self": {"href": "./current-identity"}, "mfa": {"href": "./current-identity/mfa"}}


def test_deleting_an_identity_cascades(admin):
    iid = with_password(admin, "goner")
    assert login(admin, "goner").status_code == 200
    assert admin.delete(f"/identities/{iid}").status_code == 200
    assert admin.get("/authenticators", params={"filter": f'identity = "{iid}"'}).json()["data"] == []
    assert admin.get("/api-sessions", params={"filter": f'identity = "{iid}"'}).json()["data"] == []
    assert_error(login(admin, "goner"), 401, "INVALID_AUTH")


# ------------------------------------------------------------------ externalId
def test_external_id_unique_blank_is_null(admin):
    admin.create("identities", {"name": "e1", "type": "User", "isAdmin": False, "externalId": "same"})
    err = assert_error(
        admin.post("/identities", json={"name": "e2", "type": "User", "isAdmin": False, "externalId": "same"}),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"] == {
        "field": "externalId",
        "reason": "duplicate value 'same' in unique index on identities store",
        "value": "same",
    }
    a = admin.create("identities", {"name": "e3", "type": "User", "isAdmin": False, "externalId": "  "})
    b = admin.create("identities", {"name": "e4", "type": "User", "isAdmin": False, "externalId": ""})
    assert get(admin, a)["externalId"] is None and get(admin, b)["externalId"] is None
    err = assert_error(admin.patch(f"/identities/{a}", json={"externalId": "same"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "externalId"
    assert (
        admin.get("/identities", params={"filter": 'externalId = "same"'}).json()["meta"]["pagination"]["totalCount"]
        == 1
    )


# ------------------------------------------------------------------ hosting maps
def test_hosting_maps(admin, service_ids):
    s1, s2 = service_ids
    iid = admin.create(
        "identities",
        {
            "name": "host",
            "type": "Device",
            "isAdmin": False,
            "serviceHostingCosts": {s1: 10, s2: 20},
            "serviceHostingPrecedences": {s1: "required", s2: "weird"},
        },
    )
    d = get(admin, iid)
    assert d["serviceHostingCosts"] == {s1: 10, s2: 20}
    assert d["serviceHostingPrecedences"] == {s1: "required", s2: "default"}
    assert admin.patch(f"/identities/{iid}", json={"serviceHostingCosts": {s2: 1}}).status_code == 200
    d = get(admin, iid)
    assert d["serviceHostingCosts"] == {s2: 1}, "a PATCH replaces the map"
    assert d["serviceHostingPrecedences"] == {s1: "required", s2: "default"}


def test_hosting_maps_refuse_unknown_services_and_bad_costs(admin, service_ids):
    err = assert_error(
        admin.post(
            "/identities", json={"name": "h", "type": "User", "isAdmin": False, "serviceHostingCosts": {"nope": 1}}
        ),
        404,
        "NOT_FOUND",
    )
    assert "nope" in err["cause"]["message"]
    err = assert_error(
        admin.post(
            "/identities",
            json={"name": "h", "type": "User", "isAdmin": False, "serviceHostingCosts": {service_ids[0]: 70000}},
        ),
        400,
        "COULD_NOT_VALIDATE",
    )
    assert err["cause"]["field"].startswith("serviceHostingCosts")


def test_default_hosting_precedence_values(admin):
    iid = admin.create(
        "identities", {"name": "prec", "type": "User", "isAdmin": False, "defaultHostingPrecedence": "failed"}
    )
    assert get(admin, iid)["defaultHostingPrecedence"] == "failed"
    # refused, as upstream's validation does (it names the three values)
    r = admin.patch(f"/identities/{iid}", json={"defaultHostingPrecedence": "nonsense"})
    assert assert_error(r, 400, "COULD_NOT_VALIDATE")["cause"]["field"] == "defaultHostingPrecedence"
    assert get(admin, iid)["defaultHostingPrecedence"] == "failed"


# ------------------------------------------------------------------ login side effects
def test_login_records_env_and_sdk_info(admin):
    iid = with_password(admin, "infoed")
    r = admin.client.post(
        admin.prefix + "/authenticate?method=password",
        json={
            "username": "infoed",
            "password": "Secret-pw1",
            "envInfo": {"os": "linux", "arch": "amd64"},
            "sdkInfo": {"type": "ziti-sdk-c"},
        },
    )
    assert r.status_code == 200, r.text
    d = get(admin, iid)
    assert d["envInfo"] == {"os": "linux", "arch": "amd64"}
    assert d["sdkInfo"] == {"type": "ziti-sdk-c"}
    assert d["hasApiSession"] is True


def test_filters_on_identity_fields(admin):
    admin.create("identities", {"name": "alpha", "type": "User", "isAdmin": True, "roleAttributes": ["x"]})
    admin.create("identities", {"name": "beta", "type": "User", "isAdmin": False, "roleAttributes": ["x", "y"]})

    def names(q):
        return sorted(i["name"] for i in admin.get("/identities", params={"filter": q}).json()["data"])

    assert names('isAdmin = true and name != "Default Admin"') == ["alpha"]
    assert names('anyOf(roleAttributes) = "y"') == ["beta"]
    assert names('name in ["alpha", "beta"] sort by name desc') == ["alpha", "beta"]
    assert names('type = "Default" and name icontains "ALP"') == ["alpha"]
    assert names("count(roleAttributes) > 1") == ["beta"]


def test_pages_at_any_offset_follow_the_sort_and_the_filter(admin):
    for i in range(23):
        admin.create(
            "identities",
            {
                "name": f"pager-{i % 7}-{i:02d}",
                "type": "User",
                "isAdmin": False,
                "roleAttributes": ["even"] if i % 2 == 0 else [],
            },
        )
    query = 'name contains "pager" and anyOf(roleAttributes) = "even" sort by name desc'
    whole = admin.get("/identities", params={"filter": query, "limit": "-1"}).json()["data"]
    names = [x["name"] for x in whole]
    assert len(names) == 12 and names == sorted(names, reverse=True)
    paged = []
    for offset in range(0, 15, 5):
        page = admin.get("/identities", params={"filter": query, "limit": "5", "offset": str(offset)}).json()
        assert page["meta"]["pagination"] == {"limit": 5, "offset": offset, "totalCount": 12}
        paged += page["data"]
    assert paged == whole
    skip_in_filter = admin.get("/identities", params={"filter": query + " skip 10 limit 5"}).json()["data"]
    assert [x["name"] for x in skip_in_filter] == names[10:]


# ------------------------------------------------------------------ tracing
def test_trace_enable_disable(admin):
    iid = admin.create("identities", {"name": "traced", "type": "User", "isAdmin": False})
    r = admin.put(f"/identities/{iid}/trace", json={"enabled": True, "duration": "1h30m", "traceId": "t1"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["enabled"] is True and data["traceId"] == "t1" and data["until"].endswith("Z")
    r = admin.put(f"/identities/{iid}/trace", json={"enabled": False})
    assert r.json()["data"]["enabled"] is False
    # without a trace id, one is generated (a UUID), as upstream does
    generated = admin.put(f"/identities/{iid}/trace", json={"enabled": True, "duration": "1m"}).json()["data"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", generated["traceId"])
    assert_error(
        admin.put(f"/identities/{iid}/trace", json={"enabled": True, "duration": "soon"}), 400, "COULD_NOT_VALIDATE"
    )
    assert_error(admin.put("/identities/nope/trace", json={"enabled": True}), 404, "NOT_FOUND")
