"""Policy advice, identity service-config overrides and the permissions of a service detail."""

from __future__ import annotations

from tests.conftest import assert_error


def test_policy_advice(admin, net):
    i = net.identity("emp", name="ann")
    s = net.service("web", name="web")
    r1, r2, r3 = net.router("a", name="er-1"), net.router("a", "b", name="er-2"), net.router("c", name="er-3")
    net.erp(identities=["#emp"], routers=["#a"])
    net.serp(services=["#web"], routers=["#b", "#c"])

    d = admin.get(f"/identities/{i}/policy-advice/{s}").json()["data"]
    # nothing allowed yet: false booleans are omitted, as upstream's omitempty does
    assert "isDialAllowed" not in d and "isBindAllowed" not in d
    assert d["identityRouterCount"] == 2 and d["serviceRouterCount"] == 2
    assert [x["name"] for x in d["commonRouters"]] == ["er-2"]
    common = d["commonRouters"][0]
    assert common["id"] == r2 and common["entity"] == "edge-routers" and common["isOnline"] is False
    assert set(common["_links"]) == {"self", "edge-router-policies"}
    assert d["identityId"] == i and d["identity"]["name"] == "ann" and d["identity"]["entity"] == "identities"
    assert {"self", "services", "service-configs", "auth-policies"} <= set(d["identity"]["_links"])
    assert d["serviceId"] == s and d["service"]["name"] == "web"
    assert set(d["service"]["_links"]) == {
        "self",
        "service-edge-router-policies",
        "service-policies",
        "terminators",
        "configs",
    }

    net.sp("Dial", identities=[f"@{i}"], services=["#web"])
    d = admin.get(f"/identities/{i}/policy-advice/{s}").json()["data"]
    assert d["isDialAllowed"] is True and "isBindAllowed" not in d
    net.sp("Bind", identities=["#emp"], services=[f"@{s}"])
    assert admin.get(f"/identities/{i}/policy-advice/{s}").json()["data"]["isBindAllowed"] is True

    lone = net.identity()
    d = admin.get(f"/identities/{lone}/policy-advice/{s}").json()["data"]
    assert d["commonRouters"] is None and "identityRouterCount" not in d and d["serviceRouterCount"] == 2
    assert_error(admin.get(f"/identities/nope/policy-advice/{s}"), 404, "NOT_FOUND")
    assert_error(admin.get(f"/identities/{i}/policy-advice/nope"), 404, "NOT_FOUND")
    assert r1 and r3


def test_identity_service_configs(admin, net):
    i = net.identity()
    s1, s2 = net.service(name="alpha"), net.service(name="beta")
    t1 = admin.create("config-types", {"name": "t1", "schema": {}})
    t2 = admin.create("config-types", {"name": "t2", "schema": {}})
    a = admin.create("configs", {"name": "a", "configTypeId": t1, "data": {}})
    b = admin.create("configs", {"name": "b", "configTypeId": t1, "data": {}})
    c = admin.create("configs", {"name": "c", "configTypeId": t2, "data": {}})

    r = admin.get(f"/identities/{i}/service-configs")
    assert r.json() == {
        "data": [],
        "meta": {"pagination": {"limit": 0, "offset": 0, "totalCount": 0}},  # upstream: no filterableFields
    }
    r = admin.post(
        f"/identities/{i}/service-configs",
        json=[{"serviceId": s1, "configId": a}, {"serviceId": s1, "configId": c}, {"serviceId": s2, "configId": a}],
    )
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    # one config per type per service: b replaces a for s1
    admin.post(f"/identities/{i}/service-configs", json=[{"serviceId": s1, "configId": b}])
    body = admin.get(f"/identities/{i}/service-configs").json()
    pairs = {(x["serviceId"], x["configId"]) for x in body["data"]}
    assert pairs == {(s1, b), (s1, c), (s2, a)}
    assert body["meta"]["pagination"] == {"limit": 3, "offset": 0, "totalCount": 3}
    item = next(x for x in body["data"] if x["configId"] == b)
    assert item["config"]["name"] == "b" and item["config"]["entity"] == "configs"
    assert item["service"]["name"] == "alpha" and item["service"]["_links"]["self"]["href"] == f"./services/{s1}"

    # removal goes by the config's type, whichever config of that type is mapped
    assert admin.delete(f"/identities/{i}/service-configs", json=[{"serviceId": s1, "configId": a}]).status_code == 200
    pairs = {(x["serviceId"], x["configId"]) for x in admin.get(f"/identities/{i}/service-configs").json()["data"]}
    assert pairs == {(s1, c), (s2, a)}
    assert admin.delete(f"/identities/{i}/service-configs").status_code == 200  # no body: nothing removed
    assert len(admin.get(f"/identities/{i}/service-configs").json()["data"]) == 2

    # a config in use by an override cannot be deleted; the service or identity going removes it
    assert_error(admin.delete(f"/configs/{a}"), 409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert admin.delete(f"/services/{s2}").status_code == 200
    assert admin.delete(f"/configs/{a}").status_code == 200
    assert admin.delete(f"/identities/{i}").status_code == 200
    assert admin.delete(f"/configs/{c}").status_code == 200


def test_identity_service_config_errors(admin, net):
    i, s = net.identity(), net.service()
    t = admin.create("config-types", {"name": "t", "schema": {}})
    c = admin.create("configs", {"name": "c", "configTypeId": t, "data": {}})
    assert_error(
        admin.post(f"/identities/{i}/service-configs", json=[{"serviceId": s, "configId": "nope"}]), 404, "NOT_FOUND"
    )
    assert_error(
        admin.post(f"/identities/{i}/service-configs", json=[{"serviceId": "nope", "configId": c}]), 404, "NOT_FOUND"
    )
    assert_error(
        admin.post("/identities/nope/service-configs", json=[{"serviceId": s, "configId": c}]), 404, "NOT_FOUND"
    )
    assert_error(admin.get("/identities/nope/service-configs"), 404, "NOT_FOUND")
    assert_error(
        # an object where the list belongs fails upstream's unmarshalling
        admin.post(f"/identities/{i}/service-configs", json={"serviceId": s, "configId": c}), 400,
        "COULD_NOT_PARSE_BODY")
    assert_error(admin.post(f"/identities/{i}/service-configs", json=[{"serviceId": s}]), 400, "COULD_NOT_VALIDATE")
    # a failed request leaves nothing behind
    assert admin.get(f"/identities/{i}/service-configs").json()["data"] == []


def test_service_permissions_of_the_caller(admin, net):
    me = admin.get("/current-identity").json()["data"]["id"]
    s = net.service("web")
    assert admin.get(f"/services/{s}").json()["data"]["permissions"] == ["Invalid"]
    net.sp("Dial", identities=[f"@{me}"], services=["#web"])
    assert admin.get(f"/services/{s}").json()["data"]["permissions"] == ["Dial"]
    net.sp("Bind", identities=["#all"], services=[f"@{s}"])
    assert admin.get(f"/services/{s}").json()["data"]["permissions"] == ["Bind", "Dial"]
