"""Edge routers, routers and transit routers: CRUD, enrollment JWTs, one name namespace, cascades."""

from __future__ import annotations

import jwt
import pytest

from tests.conftest import assert_error
from ziti_lite.api import crud
from ziti_lite.resources.routers import EDGE_ROUTERS


def _detail(admin, collection, id):
    r = admin.get(f"/{collection}/{id}")
    assert r.status_code == 200, r.text
    return r.json()["data"]


def _claims(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def _ids(r) -> list[str]:
    assert r.status_code == 200, r.text
    return [x["id"] for x in r.json()["data"]]


# ------------------------------------------------------------------ edge routers
def test_edge_router_create_and_detail(admin):
    id = admin.create("edge-routers", {"name": "er1", "roleAttributes": ["east", "east", "web"],
                                       "appData": {"k": "v"}, "tags": {"t": 1}})
    d = _detail(admin, "edge-routers", id)
    assert d["name"] == "er1"
    assert d["roleAttributes"] == ["east", "web"]
    assert d["appData"] == {"k": "v"} and d["tags"] == {"t": 1}
    assert d["cost"] == 0 and d["noTraversal"] is False and d["disabled"] is False
    assert d["isTunnelerEnabled"] is False and d["isVerified"] is False
    # never-connected live state
    assert d["isOnline"] is False and d["hostname"] == "" and d["supportedProtocols"] == {}
    assert d["syncStatus"] == "SYNC_UNKNOWN"
    assert d["versionInfo"] == {"version": "", "revision": "", "buildDate": "", "os": "", "arch": ""}
    assert d["certPem"] is None and d["unverifiedFingerprint"] is None and d["unverifiedCertPem"] is None
    assert "fingerprint" not in d  # omitted while empty
    assert d["_links"]["self"]["href"] == f"./edge-routers/{id}"
    assert d["_links"]["edge-router-policies"]["href"] == f"./edge-routers/{id}/edge-router-policies"
    # the erott enrollment, signed and pointing at the router
    claims = _claims(d["enrollmentJwt"])
    assert claims["em"] == "erott" and claims["sub"] == id and claims["jti"] == d["enrollmentToken"]
    assert d["enrollmentCreatedAt"] <= d["enrollmentExpiresAt"]


def test_edge_router_verified_hides_enrollment(admin, ctl):
    id = admin.create("edge-routers", {"name": "er-verified"})
    ctl.store.execute(
        "UPDATE routers SET is_verified = 1, fingerprint = 'abc123', cert_pem = 'PEM' WHERE id = ?", (id,)
    )
    d = _detail(admin, "edge-routers", id)
    assert d["isVerified"] is True and d["fingerprint"] == "abc123" and d["certPem"] == "PEM"
    for key in ("enrollmentJwt", "enrollmentToken", "enrollmentCreatedAt", "enrollmentExpiresAt"):
        assert key not in d


def test_edge_router_validation(admin):
    err = assert_error(admin.post("/edge-routers", json={"name": "er", "cost": 70000}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "cost"
    err = assert_error(admin.post("/edge-routers", json={"name": "er", "cost": -1}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "cost"
    err = assert_error(admin.post("/edge-routers", json={"cost": 1}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"
    err = assert_error(admin.post("/edge-routers", json={"name": ""}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"
    err = assert_error(
        admin.post("/edge-routers", json={"name": "er", "roleAttributes": ["#bad"]}), 400, "COULD_NOT_VALIDATE"
    )
    assert err["cause"]["field"] == "roleAttributes"
    assert admin.post("/edge-routers", json={"name": "er", "cost": 65535}).status_code == 201


def test_edge_router_put_and_patch(admin):
    id = admin.create(
        "edge-routers",
        {
            "name": "er-up",
            "isTunnelerEnabled": True,
            "cost": 9,
            "noTraversal": True,
            "disabled": True,
            "roleAttributes": ["a"],
            "appData": {"x": 1},
            "tags": {"t": "1"},
        },
    )
    assert admin.patch(f"/edge-routers/{id}", json={"cost": 12, "name": None}).status_code == 200
    d = _detail(admin, "edge-routers", id)
    assert d["cost"] == 12 and d["name"] == "er-up" and d["isTunnelerEnabled"] is True and d["roleAttributes"] == ["a"]
    r = admin.put(f"/edge-routers/{id}", json={"name": "er-up2"})
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = _detail(admin, "edge-routers", id)
    assert (d["name"], d["cost"], d["noTraversal"], d["disabled"], d["isTunnelerEnabled"]) == (
        "er-up2",
        0,
        False,
        False,
        False,
    )
    # null: upstream's storage keeps no empty list
    assert d["roleAttributes"] is None and d["appData"] == {} and d["tags"] == {}
    err = assert_error(admin.put(f"/edge-routers/{id}", json={"name": "x", "cost": 65536}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "cost"


def test_edge_router_list_and_filters(admin):
    a = admin.create("edge-routers", {"name": "er-a", "roleAttributes": ["red"], "cost": 5})
    b = admin.create("edge-routers", {"name": "er-b", "roleAttributes": ["blue"], "isTunnelerEnabled": True})
    t = admin.create("transit-routers", {"name": "tr-a"})
    r = admin.get("/edge-routers")
    assert sorted(_ids(r)) == sorted([a, b]), "transit routers are not edge routers"
    fields = r.json()["meta"]["filterableFields"]
    for f in (
        "name",
        "roleAttributes",
        "isVerified",
        "isTunnelerEnabled",
        "cost",
        "fingerprint",
        "connected",
        "online",
    ):
        assert f in fields
    assert _ids(admin.get("/edge-routers", params={"filter": 'anyOf(roleAttributes) = "red"'})) == [a]
    assert _ids(admin.get("/edge-routers", params={"filter": "isTunnelerEnabled = true"})) == [b]
    assert _ids(admin.get("/edge-routers", params={"filter": "cost > 1"})) == [a]
    assert _ids(admin.get("/edge-routers", params={"filter": 'name contains "er-" sort by name desc'})) == [b, a]
    assert sorted(
        _ids(admin.get("/edge-routers", params={"filter": "isVerified = false and online = false"}))
    ) == sorted([a, b])
    assert _ids(admin.get("/edge-routers", params={"filter": "connected = true"})) == []
    assert_error(admin.get(f"/edge-routers/{t}"), 404, "NOT_FOUND")


def test_edge_router_delete_cleans_up(admin, ctl):
    id = admin.create("edge-routers", {"name": "er-del"})
    assert ctl.store.value("SELECT count(*) FROM enrollments WHERE edge_router_id = ?", (id,)) == 1
    r = admin.delete(f"/edge-routers/{id}")
    assert r.status_code == 200
    assert ctl.store.value("SELECT count(*) FROM enrollments WHERE edge_router_id = ?", (id,)) == 0
    assert_error(admin.get(f"/edge-routers/{id}"), 404, "NOT_FOUND")
    assert_error(admin.get(f"/routers/{id}"), 404, "NOT_FOUND")


def test_edge_router_re_enroll(admin, ctl):
    id = admin.create("edge-routers", {"name": "er-re"})
    first = _detail(admin, "edge-routers", id)["enrollmentToken"]
    ctl.store.execute("UPDATE routers SET is_verified = 1, fingerprint = 'ff', cert_pem = 'PEM' WHERE id = ?", (id,))
    r = admin.post(f"/edge-routers/{id}/re-enroll")
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    d = _detail(admin, "edge-routers", id)
    assert d["isVerified"] is False and d["certPem"] is None and "fingerprint" not in d
    assert d["enrollmentToken"] != first and _claims(d["enrollmentJwt"])["sub"] == id
    assert ctl.store.value("SELECT count(*) FROM enrollments WHERE edge_router_id = ?", (id,)) == 1
    assert_error(admin.post("/edge-routers/noSuchId0/re-enroll"), 404, "NOT_FOUND")


# ------------------------------------------------------------------ routers / transit routers
def test_transit_router_create_and_detail(admin):
    id = admin.create("transit-routers", {"name": "tr1", "cost": 4, "noTraversal": True, "disabled": True})
    for collection in ("transit-routers", "routers"):
        d = _detail(admin, collection, id)
        assert d["name"] == "tr1" and d["cost"] == 4 and d["noTraversal"] is True
        assert d["disabled"] is False, "router create ignores disabled (as upstream)"
        assert d["isVerified"] is False and d["isOnline"] is False
        # an unenrolled router's fingerprint is null, as upstream's
        assert d["fingerprint"] is None and d["unverifiedFingerprint"] is None and d["unverifiedCertPem"] is None
        claims = _claims(d["enrollmentJwt"])
        assert claims["em"] == "trott" and claims["sub"] == id and claims["jti"] == d["enrollmentToken"]
        assert d["enrollmentExpiresAt"] and d["enrollmentCreatedAt"]


def test_routers_list_every_router(admin):
    e = admin.create("edge-routers", {"name": "r-edge"})
    t = admin.create("routers", {"name": "r-transit"})
    for collection in ("routers", "transit-routers"):
        r = admin.get(f"/{collection}", params={"filter": 'name contains "r-" sort by name'})
        assert _ids(r) == [e, t]
        edge = r.json()["data"][0]
        assert edge["isVerified"] is True and "enrollmentJwt" not in edge  # no transit sub-record
    assert _ids(admin.get("/routers", params={"filter": 'name = "r-transit"'})) == [t]


def test_router_update_rules(admin):
    t = admin.create("routers", {"name": "tr-up", "cost": 1, "tags": {"a": "b"}})
    assert admin.patch(f"/routers/{t}", json={"cost": 7, "disabled": True}).status_code == 200
    d = _detail(admin, "routers", t)
    assert d["cost"] == 7 and d["disabled"] is True and d["tags"] == {"a": "b"}
    assert admin.put(f"/transit-routers/{t}", json={"name": "tr-up2"}).status_code == 200
    d = _detail(admin, "routers", t)
    assert (d["name"], d["cost"], d["disabled"], d["tags"]) == ("tr-up2", 0, False, {})
    # an edge router is not editable through /routers
    e = admin.create("edge-routers", {"name": "er-not-here"})
    assert_error(admin.put(f"/routers/{e}", json={"name": "renamed"}), 409, "CAN_NOT_UPDATE_ROUTER")
    assert_error(admin.patch(f"/transit-routers/{e}", json={"cost": 2}), 409, "CAN_NOT_UPDATE_ROUTER")
    assert _detail(admin, "edge-routers", e)["name"] == "er-not-here"


def test_name_unique_across_edge_and_transit(admin):
    admin.create("edge-routers", {"name": "shared"})
    err = assert_error(admin.post("/transit-routers", json={"name": "shared"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"
    admin.create("routers", {"name": "shared-2"})
    err = assert_error(admin.post("/edge-routers", json={"name": "shared-2"}), 400, "COULD_NOT_VALIDATE")
    assert err["cause"]["field"] == "name"
    other = admin.create("edge-routers", {"name": "other"})
    assert_error(admin.patch(f"/edge-routers/{other}", json={"name": "shared-2"}), 400, "COULD_NOT_VALIDATE")
    assert admin.post("/edge-routers", json={"name": "Shared"}).status_code == 201, "names are case-sensitive"


def test_delete_edge_router_through_routers_notifies_edge_listeners(admin, ctl, monkeypatch):
    seen = []
    monkeypatch.setitem(
        crud.LISTENERS,
        EDGE_ROUTERS,
        [*crud.LISTENERS.get(EDGE_ROUTERS, []), lambda ctx, id, before, values: seen.append((id, values))],
    )
    e = admin.create("edge-routers", {"name": "er-gone", "isTunnelerEnabled": True})
    assert seen == [(e, seen[0][1])] and seen[0][1]["is_tunneler_enabled"] is True
    assert admin.delete(f"/routers/{e}").status_code == 200
    assert seen[-1] == (e, None)
    assert ctl.store.value("SELECT count(*) FROM enrollments WHERE edge_router_id = ?", (e,)) == 0


def test_router_delete_cascades_terminators_and_enrollments(admin, ctl):
    svc = admin.create("services", {"name": "svc-r", "encryptionRequired": True})
    t = admin.create("transit-routers", {"name": "tr-del"})
    e = admin.create("edge-routers", {"name": "er-del2"})
    t_term = admin.create("terminators", {"service": svc, "router": t, "binding": "transport", "address": "tcp:a:1"})
    e_term = admin.create("terminators", {"service": svc, "router": e, "binding": "transport", "address": "tcp:a:2"})
    assert admin.delete(f"/transit-routers/{t}").status_code == 200
    assert_error(admin.get(f"/terminators/{t_term}"), 404, "NOT_FOUND")
    assert ctl.store.value("SELECT count(*) FROM enrollments WHERE transit_router_id = ?", (t,)) == 0
    assert admin.get(f"/terminators/{e_term}").status_code == 200
    assert admin.delete(f"/edge-routers/{e}").status_code == 200
    assert_error(admin.get(f"/terminators/{e_term}"), 404, "NOT_FOUND")


@pytest.mark.parametrize("collection", ["edge-routers", "routers", "transit-routers"])
def test_non_admin_refused(anon, collection):
    assert_error(anon.get(f"/{collection}"), 401, "UNAUTHORIZED")
    assert_error(anon.post(f"/{collection}", json={"name": "x"}), 401, "UNAUTHORIZED")


def test_re_enroll_needs_admin(anon):
    assert_error(anon.post("/edge-routers/someId/re-enroll"), 401, "UNAUTHORIZED")


# ------------------------------------------------------------------ OpenZiti 2.0's fields
CCL = {"tls:10.0.0.1:6262": ["ctrl.default", "ctrl.high"]}


@pytest.mark.parametrize(("collection", "views"), [("edge-routers", ("edge-routers", "routers")),
                                                   ("routers", ("routers", "transit-routers"))])
def test_ctrl_chan_listeners_configs_and_interfaces_as_v2(admin, client, collection, views):
    """As v2.0.3: ctrlChanListeners echoed when set (left out when none), a PUT without them
    clears them, a PATCH sets them; configs taken, unchecked and shown null; interfaces null
    until the router reports some (tests/ctrl/test_reported.py)."""
    set_ = admin.create(collection, {"name": f"v2-{collection}", "ctrlChanListeners": CCL,
                                     "configs": ["no-such-config"]})
    bare = admin.create(collection, {"name": f"v2-{collection}-bare"})
    for view in views:
        d = _detail(admin, view, set_)
        assert d["ctrlChanListeners"] == CCL and d["configs"] is None and d["interfaces"] is None
        d = _detail(admin, view, bare)
        assert "ctrlChanListeners" not in d and d["configs"] is None and d["interfaces"] is None
    fabric = client.get(f"/fabric/v1/routers/{set_}", headers={"zt-session": admin.token}).json()["data"]
    assert fabric["ctrlChanListeners"] == CCL and fabric["interfaces"] is None and "configs" not in fabric

    assert admin.patch(f"/{collection}/{set_}", json={"tags": {"a": 1}}).status_code == 200
    assert _detail(admin, collection, set_)["ctrlChanListeners"] == CCL
    assert admin.put(f"/{collection}/{set_}", json={"name": f"v2-{collection}"}).status_code == 200
    assert "ctrlChanListeners" not in _detail(admin, collection, set_)
    assert admin.patch(f"/{collection}/{bare}", json={"ctrlChanListeners": {"tls:b:1": []}}).status_code == 200
    assert _detail(admin, collection, bare)["ctrlChanListeners"] == {"tls:b:1": []}
    assert admin.patch(f"/{collection}/{bare}", json={"ctrlChanListeners": {}}).status_code == 200
    assert "ctrlChanListeners" not in _detail(admin, collection, bare)

    for body in ({"ctrlChanListeners": {"tls:1": "x"}}, {"ctrlChanListeners": [1]}, {"configs": "x"}):
        assert_error(admin.post(f"/{collection}", json={"name": "v2-bad", **body}), 400, "COULD_NOT_PARSE_BODY")


def test_identities_show_interfaces_null_until_reported(admin):
    iid = admin.create("identities", {"name": "v2-ifaces", "type": "User", "isAdmin": False})
    assert admin.get(f"/identities/{iid}").json()["data"]["interfaces"] is None
    assert admin.get("/current-identity").json()["data"]["interfaces"] is None
    # reported only: a body naming them sets nothing
    other = admin.create("identities", {"name": "v2-ifaces-2", "type": "User", "isAdmin": False,
                                        "interfaces": [{"name": "eth0"}]})
    assert admin.get(f"/identities/{other}").json()["data"]["interfaces"] is None
