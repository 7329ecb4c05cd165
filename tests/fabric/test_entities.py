"""The fabric API's routers, services and terminators (``ziti_lite/fabric/entities.py``): upstream's
shapes, envelopes, paging meta, filters, sub-lists, 404s and admin-only access."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import assert_error

ROUTER_FIELDS = {"id", "createdAt", "updatedAt", "tags", "_links", "name", "fingerprint", "connected", "cost",
                 "noTraversal", "disabled", "listenerAddresses", "interfaces"}   # interfaces: v2.0.3's, null
TERMINATOR_FIELDS = {"id", "createdAt", "updatedAt", "tags", "_links", "serviceId", "service", "routerId", "router",
                     "binding", "address", "instanceId", "cost", "precedence", "dynamicCost", "hostId"}


def network(admin) -> dict:
    ids = {
        "edge": admin.create("edge-routers", {"name": "er-a", "cost": 7, "noTraversal": True}),
        "transit": admin.create("transit-routers", {"name": "tr-b"}),
        "svc": admin.create("services", {"name": "svc-a", "terminatorStrategy": "weighted",
                                         "encryptionRequired": True}),
        "other": admin.create("services", {"name": "svc-b", "encryptionRequired": True}),
    }
    ids["term"] = admin.create("terminators", {"service": ids["svc"], "router": ids["edge"], "binding": "transport",
                                                "address": "tcp:localhost:80", "identity": "inst-1", "cost": 3,
                                                "precedence": "required"})
    ids["term2"] = admin.create("terminators", {"service": ids["other"], "router": ids["transit"],
                                                 "binding": "transport", "address": "tcp:localhost:81"})
    return ids


def test_routers_list_in_upstreams_shape(admin, fabric):
    ids = network(admin)
    body = fabric.get("/routers").json()
    assert body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": len(body["data"])}
    assert set(body["meta"]["filterableFields"]) >= {"id", "createdAt", "updatedAt", "isSystem", "fingerprint",
                                                    "noTraversal", "tags", "name", "cost", "disabled", "connected"}
    by_name = {r["name"]: r for r in body["data"]}
    edge = by_name["er-a"]
    assert set(edge) == ROUTER_FIELDS      # no versionInfo while offline, as upstream
    assert edge["id"] == ids["edge"] and edge["cost"] == 7 and edge["noTraversal"] is True
    assert edge["connected"] is False and edge["disabled"] is False
    assert edge["fingerprint"] is None and edge["listenerAddresses"] is None and edge["interfaces"] is None
    assert edge["_links"] == {"self": {"href": f"./routers/{ids['edge']}"},
                              "terminators": {"href": f"./routers/{ids['edge']}/terminators"}}
    assert by_name["tr-b"]["id"] == ids["transit"]     # edge and transit routers alike
    detail = fabric.get(f"/routers/{ids['edge']}").json()
    assert detail == {"data": edge, "meta": {}}


def test_a_connected_router_shows_its_version_and_link_listeners(admin, fabric, ctl):
    rid = admin.create("edge-routers", {"name": "online-r"})
    ctl.router_states[rid] = {"isOnline": True, "versionInfo": {"version": "v1.3.3", "revision": "abc",
                                                                "buildDate": "", "os": "linux", "arch": "amd64"}}
    ctl.store.online_routers.add(rid)
    listener = {"address": "tls:10.0.0.1:6000", "protocol": "tls", "costTags": []}
    ctl.ctrl_server = SimpleNamespace(routers={rid: SimpleNamespace(listeners=[listener])})   # type: ignore
    try:
        r = fabric.get(f"/routers/{rid}").json()["data"]
        assert r["connected"] is True
        assert r["versionInfo"] == {"version": "v1.3.3", "revision": "abc", "os": "linux", "arch": "amd64"}
        assert r["listenerAddresses"] == [{"address": "tls:10.0.0.1:6000", "protocol": "tls"}]
        listed = fabric.get("/routers?filter=connected=true").json()
        assert [x["id"] for x in listed["data"]] == [rid]
        assert rid not in [x["id"] for x in fabric.get("/routers?filter=connected=false limit none").json()["data"]]
    finally:
        ctl.ctrl_server = None
        ctl.router_states.pop(rid)
        ctl.store.online_routers.discard(rid)


def test_services_list_and_detail(admin, fabric):
    ids = network(admin)
    body = fabric.get('/services?filter=name="svc-a"').json()
    assert body["meta"]["pagination"] == {"limit": 10, "offset": 0, "totalCount": 1}
    assert set(body["meta"]["filterableFields"]) == {"id", "createdAt", "updatedAt", "tags", "isSystem", "name",
                                                     "terminatorStrategy"}
    (svc,) = body["data"]
    assert set(svc) == {"id", "createdAt", "updatedAt", "tags", "_links", "name", "terminatorStrategy"}
    assert svc["terminatorStrategy"] == "weighted" and svc["id"] == ids["svc"]
    assert svc["_links"]["terminators"] == {"href": f"./services/{ids['svc']}/terminators"}
    assert fabric.get(f"/services/{ids['svc']}").json()["data"] == svc


def test_terminators_name_their_router_service_and_host(admin, fabric):
    ids = network(admin)
    body = fabric.get("/terminators").json()
    assert body["meta"]["pagination"]["totalCount"] == 2
    assert {"instanceId", "service", "service.name", "router", "router.name", "binding", "address",
            "hostId"} <= set(body["meta"]["filterableFields"])
    t = next(x for x in body["data"] if x["id"] == ids["term"])
    assert set(t) == TERMINATOR_FIELDS
    assert (t["serviceId"], t["routerId"], t["binding"], t["address"]) == (ids["svc"], ids["edge"], "transport",
                                                                          "tcp:localhost:80")
    assert (t["instanceId"], t["cost"], t["precedence"], t["dynamicCost"], t["hostId"]) == ("inst-1", 3, "required",
                                                                                           0, "")
    assert t["service"] == {"_links": {"self": {"href": f"./services/{ids['svc']}"},
                                       "terminators": {"href": f"./services/{ids['svc']}/terminators"}},
                            "entity": "services", "id": ids["svc"], "name": "svc-a"}
    assert t["router"]["entity"] == "routers" and t["router"]["name"] == "er-a"
    assert fabric.get(f"/terminators/{ids['term']}").json()["data"] == t
    # filters by reference, by the name behind it, and the sub-lists of a router and a service
    assert [x["id"] for x in fabric.get('/terminators?filter=router.name="tr-b"').json()["data"]] == [ids["term2"]]
    assert [x["id"] for x in fabric.get(f'/terminators?filter=service="{ids["svc"]}"').json()["data"]] == [ids["term"]]
    assert [x["id"] for x in fabric.get(f"/routers/{ids['transit']}/terminators").json()["data"]] == [ids["term2"]]
    assert [x["id"] for x in fabric.get(f"/services/{ids['svc']}/terminators").json()["data"]] == [ids["term"]]


def test_paging(admin, fabric):
    for i in range(3):
        admin.create("services", {"name": f"page-{i}", "encryptionRequired": True})
    body = fabric.get('/services?filter=name contains "page-" sort by name&limit=2&offset=1').json()
    assert [s["name"] for s in body["data"]] == ["page-1", "page-2"]
    assert body["meta"]["pagination"] == {"limit": 2, "offset": 1, "totalCount": 3}


def test_bad_requests_get_upstreams_errors(admin, fabric):
    for path, entity in (("/routers/nope", "router"), ("/services/nope", "service"),
                         ("/terminators/nope", "terminator"), ("/routers/nope/terminators", "router"),
                         ("/services/nope/terminators", "service")):
        err = assert_error(fabric.get(path), 404, "NOT_FOUND")
        assert err["cause"]["message"] == f"{entity} with id nope not found"
    assert_error(fabric.get("/routers?filter=bogus=1"), 400, "INVALID_FILTER")
    err = assert_error(fabric.get("/terminators?limit=abc"), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "limit"
    assert_error(fabric.get("/services?sort=bogus"), 400, "INVALID_SORT_IDENTIFIER")
    assert_error(fabric.get("/nothing-here"), 404, "NOT_FOUND")


def test_admins_only(fabric, plain):
    for path in ("/routers", "/services", "/terminators", "/links", "/circuits", "/routers/x", "/links/x"):
        assert_error(plain.get(path), 401, "UNAUTHORIZED")
        assert_error(plain.get(path, headers={"zt-session": ""}), 401, "UNAUTHORIZED")
        assert fabric.get(path).status_code in (200, 404)
