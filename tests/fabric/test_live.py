"""The fabric API's links and circuits (``ziti_lite/fabric/live.py``) over a control channel's live
tables: the ``Link`` and ``Circuit`` records of ``ziti_lite/ctrl`` in a stand-in for the server
(``ctl.ctrl_server``: routers, the link table, live circuits), as a real router's reports leave
them. Upstream's shapes, filters on its symbols, paging, 404s."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from tests.conftest import assert_error
from ziti_lite.ctrl.circuits import Circuit
from ziti_lite.ctrl.links import Link

LINK_FIELDS = {"id", "protocol", "sourceRouter", "destRouter", "state", "staticCost", "sourceLatency", "destLatency",
               "cost", "down", "iteration"}


@pytest.fixture
def mesh(admin, ctl):
    """Three routers, links A->B and C->B, a circuit A-B-C and one on A alone."""
    rid = {n: admin.create("edge-routers", {"name": f"r-{n}"}) for n in "abc"}
    svc = admin.create("services", {"name": "mesh-svc", "encryptionRequired": True})
    term = admin.create("terminators", {"service": svc, "router": rid["c"], "binding": "edge",
                                        "address": "hosted:x"})
    links = {"l-ab": Link("l-ab", rid["a"], rid["b"], "tls", "tls:b:6000", iteration=2),
             "l-cb": Link("l-cb", rid["c"], rid["b"], "tls", "tls:b:6000", state="Pending")}
    now = time.time()
    circuits = {
        "c-long": Circuit("c-long", [rid["a"], rid["b"], rid["c"]], ["l-ab", "l-cb"], "sess", svc, term, "in", "out",
                          "client-1", {"serviceId": svc}, now - 60),
        "c-short": Circuit("c-short", [rid["c"]], [], "sess", svc, term, "in", "out", "client-2", {}, now),
    }
    ctl.ctrl_server = SimpleNamespace(routers={}, links=SimpleNamespace(table=links),  # type: ignore
                                      circuits=SimpleNamespace(live=circuits))
    yield SimpleNamespace(rid=rid, svc=svc, term=term, links=links, circuits=circuits)
    ctl.ctrl_server = None


def test_links_in_upstreams_shape(fabric, mesh):
    body = fabric.get("/links").json()
    assert body["meta"] == {"pagination": {"limit": 10, "offset": 0, "totalCount": 2}}   # no filterableFields
    ab = next(x for x in body["data"] if x["id"] == "l-ab")
    assert set(ab) == LINK_FIELDS
    a = mesh.rid["a"]
    assert ab["sourceRouter"] == {"_links": {"self": {"href": f"./routers/{a}"},
                                             "terminators": {"href": f"./routers/{a}/terminators"}},
                                  "entity": "routers", "id": a, "name": "r-a"}
    assert ab["destRouter"]["name"] == "r-b"
    assert (ab["protocol"], ab["state"], ab["iteration"], ab["down"]) == ("tls", "Connected", 2, False)
    assert (ab["staticCost"], ab["cost"], ab["sourceLatency"], ab["destLatency"]) == (1, 1, 0, 0)
    assert fabric.get("/links/l-ab").json() == {"data": ab, "meta": {}}


def test_links_filter_and_page_on_upstreams_symbols(fabric, mesh):
    ids = lambda q: [x["id"] for x in fabric.get("/links?" + q).json()["data"]]   # noqa: E731
    assert ids('filter=state="Pending"') == ["l-cb"]
    assert ids(f'filter=sourceRouter="{mesh.rid["a"]}"') == ["l-ab"]
    assert ids(f'filter=destRouter="{mesh.rid["b"]}" and iteration > 1') == ["l-ab"]
    assert ids('filter=dialAddress contains "b:6000" sort by id desc') == ["l-cb", "l-ab"]
    page = fabric.get("/links?filter=true sort by id&limit=1&offset=1").json()
    assert [x["id"] for x in page["data"]] == ["l-cb"]
    assert page["meta"]["pagination"] == {"limit": 1, "offset": 1, "totalCount": 2}
    assert_error(fabric.get("/links?filter=bogus=1"), 400, "INVALID_FILTER")
    # a sort inside the filter is part of the filter (as upstream reports it on its stores)
    assert_error(fabric.get("/links?filter=true sort by bogus"), 400, "INVALID_FILTER")
    assert_error(fabric.get("/links?limit=abc"), 400, "COULD_NOT_VALIDATE")


def test_circuits_in_upstreams_shape(fabric, mesh):
    body = fabric.get("/circuits").json()
    assert body["meta"] == {"pagination": {"limit": 10, "offset": 0, "totalCount": 2}}
    long = next(x for x in body["data"] if x["id"] == "c-long")
    assert set(long) == {"id", "createdAt", "updatedAt", "tags", "_links", "clientId", "path", "service",
                         "terminator"}
    assert long["clientId"] == "client-1" and long["tags"] == {"serviceId": mesh.svc}
    assert long["createdAt"] == long["updatedAt"] and long["createdAt"].endswith("Z")
    assert [n["name"] for n in long["path"]["nodes"]] == ["r-a", "r-b", "r-c"]
    assert [(x["entity"], x["id"], x["name"]) for x in long["path"]["links"]] == [("links", "l-ab", "l-ab"),
                                                                              ("links", "l-cb", "l-cb")]
    assert long["service"]["name"] == "mesh-svc" and long["service"]["entity"] == "services"
    assert long["terminator"] == {"_links": {"self": {"href": f"./terminators/{mesh.term}"}},
                                  "entity": "terminators", "id": mesh.term, "name": mesh.term}
    short = fabric.get("/circuits/c-short").json()["data"]
    assert short["path"] == {"nodes": [long["path"]["nodes"][2]], "links": None}


def test_circuits_filter_on_upstreams_symbols(fabric, mesh):
    ids = lambda q: [x["id"] for x in fabric.get("/circuits?" + q).json()["data"]]   # noqa: E731
    assert ids('filter=clientId="client-2"') == ["c-short"]
    assert ids(f'filter=service="{mesh.svc}" sort by createdAt') == ["c-long", "c-short"]
    assert ids(f'filter=terminator="{mesh.term}" sort by createdAt desc limit 1') == ["c-short"]
    stamp = fabric.get("/circuits/c-short").json()["data"]["createdAt"]
    assert ids(f"filter=createdAt < datetime({stamp})") == ["c-long"]


def test_a_deleted_service_under_a_live_circuit(admin, fabric, mesh):
    mesh.circuits["c-short"].service_id = "gone"
    assert fabric.get("/circuits/c-short").json()["data"]["service"]["name"] == "<deleted>"


def test_unknown_and_without_a_control_channel(fabric, mesh, ctl):
    for path, entity in (("/links/nope", "link"), ("/circuits/nope", "circuit")):
        err = assert_error(fabric.get(path), 404, "NOT_FOUND")
        assert err["cause"]["message"] == f"{entity} with id nope not found"
    ctl.ctrl_server = None
    for path in ("/links", "/circuits"):
        assert fabric.get(path).json() == {"data": [], "meta": {"pagination": {"limit": 10, "offset": 0,
                                                                              "totalCount": 0}}}
    assert_error(fabric.get("/links/l-ab"), 404, "NOT_FOUND")
