"""roleFilter/roleSemantic on entity lists and the four role-attribute lists."""

from __future__ import annotations

import pytest

from tests.conftest import assert_error

UNLIMITED = 9223372036854775807


def _ids(api, path, **params):
    r = api.get(path, params=params)
    assert r.status_code == 200, r.text
    return {x["id"] for x in r.json()["data"]}


@pytest.mark.parametrize("kind", ["identity", "service", "router", "posture_check"])
def test_role_filter(admin, net, kind):
    make = getattr(net, kind)
    collection = {"identity": "identities", "service": "services", "router": "edge-routers",
                  "posture_check": "posture-checks"}[kind]
    ab, a, b, allattr, none = make("a", "b"), make("a"), make("b"), make("all"), make()
    assert _ids(admin, f"/{collection}", roleFilter=["#a", "#b"]) == {ab}                     # AllOf by default
    assert _ids(admin, f"/{collection}", roleFilter=["#a", "#b"], roleSemantic="anyof") == {ab, a, b}
    assert _ids(admin, f"/{collection}", roleFilter=["#a", f"@{none}", "@nope"]) == {ab, a, none}
    assert _ids(admin, f"/{collection}", roleFilter=["#all"]) == {allattr}                    # not special here
    assert _ids(admin, f"/{collection}", roleFilter=["#a"], filter=f'id != "{a}"') == {ab}
    r = admin.get(f"/{collection}", params={"roleFilter": ["#a"], "roleSemantic": "AnyOf", "limit": 1})
    assert r.json()["meta"]["pagination"]["totalCount"] == 2 and len(r.json()["data"]) == 1
    assert_error(admin.get(f"/{collection}", params={"roleFilter": "#a", "roleSemantic": "Most"}), 400,
                 "COULD_NOT_VALIDATE")
    assert_error(admin.get(f"/{collection}", params={"roleFilter": "a"}), 400, "COULD_NOT_VALIDATE")


def test_role_attribute_lists(admin, net):
    net.identity("web", "eng")
    net.identity("eng", "db")
    net.service("svc-b", "svc-a")
    net.router("edge-x")
    net.posture_check("pc-1")
    body = admin.get("/identity-role-attributes").json()
    assert body == {
        "data": ["db", "eng", "web"],
        "meta": {"filterableFields": ["id"], "pagination": {"limit": UNLIMITED, "offset": 0, "totalCount": 3}},
    }
    assert admin.get("/service-role-attributes").json()["data"] == ["svc-a", "svc-b"]
    assert admin.get("/edge-router-role-attributes").json()["data"] == ["edge-x"]
    assert admin.get("/posture-check-role-attributes").json()["data"] == ["pc-1"]

    body = admin.get("/identity-role-attributes", params={"filter": 'id contains "e"'}).json()
    assert body["data"] == ["eng", "web"] and body["meta"]["pagination"]["totalCount"] == 2
    body = admin.get(
        "/identity-role-attributes", params={"filter": "true sort by id desc skip 1 limit 1", "limit": 50, "offset": 0}
    ).json()
    assert body["data"] == ["eng"]
    assert body["meta"]["pagination"] == {"limit": 1, "offset": 1, "totalCount": 3}
    # the limit/offset query params are not used by these lists
    assert admin.get("/identity-role-attributes", params={"limit": 1, "offset": 2}).json()["data"] == [
        "db",
        "eng",
        "web",
    ]
    assert_error(admin.get("/identity-role-attributes", params={"filter": "id ="}), 400, "INVALID_FILTER")
    assert_error(admin.get("/identity-role-attributes", params={"filter": 'name = "x"'}), 400, "INVALID_FILTER")

    # an attribute no longer used disappears
    for x in admin.get("/identities", params={"roleFilter": "#web"}).json()["data"]:
        admin.patch(f"/identities/{x['id']}", json={"roleAttributes": ["eng"]})
    assert admin.get("/identity-role-attributes").json()["data"] == ["db", "eng"]
