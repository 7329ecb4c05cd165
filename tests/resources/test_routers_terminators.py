"""Terminators: create defaults, references, validation, filters, PUT/PATCH rules, cascades."""

from __future__ import annotations

import pytest

from tests.conftest import assert_error


@pytest.fixture
def net(admin):
    """A service, an edge router and a transit router."""
    return {
        "svc": admin.create("services", {"name": "svc-a", "encryptionRequired": True}),
        "svc2": admin.create("services", {"name": "svc-b", "encryptionRequired": True}),
        "er": admin.create("edge-routers", {"name": "er-a"}),
        "tr": admin.create("transit-routers", {"name": "tr-a"}),
    }


def _term(admin, net, **kw) -> str:
    body = {"service": net["svc"], "router": net["er"], "binding": "transport", "address": "tcp:localhost:80", **kw}
    return admin.create("terminators", body)


def _detail(admin, id):
    r = admin.get(f"/terminators/{id}")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def _ids(r):
    assert r.status_code == 200, r.text
    return [x["id"] for x in r.json()["data"]]


def test_create_defaults_and_detail(admin, net):
    id = _term(admin, net, identity="host-1", identitySecret="c2VjcmV0", tags={"k": "v"})
    d = _detail(admin, id)
    assert d["serviceId"] == net["svc"] and d["routerId"] == net["er"]
    assert {k: d["service"][k] for k in ("entity", "id", "name")} == {"entity": "services", "id": net["svc"],
                                                                     "name": "svc-a"}
    # the reference carries the service's own links, as upstream's do
    assert d["service"]["_links"] == admin.get(f"/services/{net['svc']}").json()["data"]["_links"]
    assert d["router"] == {"entity": "transit-routers", "id": net["er"], "name": "er-a",
                           "_links": {"self": {"href": f"./transit-routers/{net['er']}"}}}
    assert (d["binding"], d["address"], d["identity"]) == ("transport", "tcp:localhost:80", "host-1")
    assert (d["cost"], d["dynamicCost"], d["precedence"]) == (0, 0, "default")
    assert d["tags"] == {"k": "v"} and d["_links"] == {"self": {"href": f"./terminators/{id}"}}
    for hidden in ("identitySecret", "instanceSecret", "hostId"):
        assert hidden not in d
    plain = _detail(admin, _term(admin, net, address="tcp:b:1"))
    assert plain["identity"] == ""


def test_binding_defaults_from_address(admin, net):
    assert _detail(admin, _term(admin, net, binding="", address="udp:1.2.3.4:53"))["binding"] == "udp"
    assert _detail(admin, _term(admin, net, binding="", address="tcp:1.2.3.4:53"))["binding"] == "transport"
    assert _detail(admin, _term(admin, net, binding="edge", address="hosted"))["binding"] == "edge"


def test_validation(admin, net):
    base = {"service": net["svc"], "router": net["tr"], "binding": "transport", "address": "tcp:x:1"}
    err = assert_error(admin.post("/terminators", json={**base, "cost": 70000}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "cost"
    err = assert_error(admin.post("/terminators", json={**base, "cost": -1}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "cost"
    err = assert_error(admin.post("/terminators", json={**base, "precedence": "sometimes"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "precedence"
    err = assert_error(admin.post("/terminators", json={k: v for k, v in base.items() if k != "address"}),
                       400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "address" and "required" in err["cause"]["reason"]
    err = assert_error(admin.post("/terminators", json={**base, "address": ""}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "address"
    err = assert_error(admin.post("/terminators", json={**base, "identitySecret": "not base64!"}), 400,
                       "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "identitySecret"
    err = assert_error(admin.post("/terminators", json={**base, "service": "noSuchSvc"}), 404, "NOT_FOUND")
    assert "noSuchSvc" in err["cause"]["message"]
    err = assert_error(admin.post("/terminators", json={**base, "router": "noSuchRtr"}), 404, "NOT_FOUND")
    assert "noSuchRtr" in err["cause"]["message"]
    assert admin.get("/terminators").json()["meta"]["pagination"]["totalCount"] == 0
    ok = admin.post("/terminators", json={**base, "cost": 65535, "precedence": "required"})
    assert ok.status_code == 201, ok.text


def test_filters(admin, net):
    a = _term(admin, net, binding="edge", address="hosted-a")
    b = _term(admin, net, service=net["svc2"], router=net["tr"], address="tcp:b:2")
    fields = admin.get("/terminators").json()["meta"]["filterableFields"]
    for f in ("service", "router", "binding", "address", "instanceId", "hostId", "service.name", "router.name"):
        assert f in fields
    assert _ids(admin.get("/terminators", params={"filter": 'router.name="er-a"'})) == [a]
    assert _ids(admin.get("/terminators", params={"filter": 'service.name = "svc-b"'})) == [b]
    assert _ids(
        admin.get("/terminators", params={"filter": f'binding="edge" and router="{net["er"]}" limit none'})
    ) == [a]
    assert _ids(admin.get("/terminators", params={"filter": f'service = "{net["svc2"]}"'})) == [b]
    assert _ids(admin.get("/terminators", params={"filter": "true sort by router.name desc"})) == [b, a]
    assert _ids(admin.get("/terminators", params={"filter": 'address contains "hosted"'})) == [a]
    assert_error(admin.get("/terminators", params={"filter": 'nope = "x"'}), 400, "INVALID_FILTER")


def test_put_and_patch(admin, net):
    id = _term(admin, net, cost=5, precedence="failed", identity="inst", tags={"a": "1"})
    # PUT: every updatable field replaced; the service never changes
    r = admin.put(
        f"/terminators/{id}",
        json={"service": net["svc2"], "router": net["tr"], "binding": "", "address": "udp:9.9.9.9:1"},
    )
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = _detail(admin, id)
    assert d["serviceId"] == net["svc"] and d["routerId"] == net["tr"] and d["router"]["name"] == "tr-a"
    assert (d["binding"], d["address"], d["cost"], d["precedence"], d["tags"]) == (
        "udp",
        "udp:9.9.9.9:1",
        0,
        "default",
        {},
    )
    assert d["identity"] == "inst"
    # PATCH: only what was sent
    assert admin.patch(f"/terminators/{id}", json={"cost": 9, "precedence": "required"}).status_code == 200
    d = _detail(admin, id)
    assert (d["cost"], d["precedence"], d["binding"], d["routerId"]) == (9, "required", "udp", net["tr"])
    assert_error(admin.patch(f"/terminators/{id}", json={"router": "noSuchRtr"}), 404, "NOT_FOUND")
    assert_error(admin.patch(f"/terminators/{id}", json={"cost": 65536}), 400, "COULD_NOT_VALIDATE")
    err = assert_error(admin.put(f"/terminators/{id}", json={"router": net["tr"]}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["value"] == "<nil>"
    assert _detail(admin, id)["routerId"] == net["tr"]


def test_system_terminators_are_read_only(admin, ctl, net):
    id = _term(admin, net)
    ctl.store.execute("UPDATE terminators SET is_system = 1 WHERE id = ?", (id,))
    assert_error(admin.patch(f"/terminators/{id}", json={"cost": 3}), 400, "ENTITY_CAN_NOT_BE_UPDATED")
    assert_error(admin.delete(f"/terminators/{id}"), 400, "ENTITY_CAN_NOT_BE_DELETED")
    assert _detail(admin, id)["cost"] == 0


def test_delete(admin, net):
    id = _term(admin, net)
    assert admin.delete(f"/terminators/{id}").status_code == 200
    assert_error(admin.get(f"/terminators/{id}"), 404, "NOT_FOUND")
    assert_error(admin.delete(f"/terminators/{id}"), 404, "NOT_FOUND")


def test_service_delete_cascades(admin, net):
    a = _term(admin, net)
    b = _term(admin, net, service=net["svc2"], address="tcp:other:1")
    assert admin.delete(f"/services/{net['svc']}").status_code == 200
    assert_error(admin.get(f"/terminators/{a}"), 404, "NOT_FOUND")
    assert _detail(admin, b)["serviceId"] == net["svc2"]


@pytest.mark.parametrize(
    "collection,key", [("edge-routers", "er"), ("routers", "er"), ("transit-routers", "tr"), ("routers", "tr")]
)
def test_router_delete_cascades(admin, net, collection, key):
    id = _term(admin, net, router=net[key])
    other = _term(admin, net, router=net["tr" if key == "er" else "er"], address="tcp:keep:1")
    assert admin.delete(f"/{collection}/{net[key]}").status_code == 200
    assert_error(admin.get(f"/terminators/{id}"), 404, "NOT_FOUND")
    assert admin.get(f"/terminators/{other}").status_code == 200


def test_non_admin_refused(anon):
    assert_error(anon.get("/terminators"), 401, "UNAUTHORIZED")
    assert_error(anon.post("/terminators", json={}), 401, "UNAUTHORIZED")
