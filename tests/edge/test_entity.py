"""The embedded router as an entity of the network: made on the first start, the same router
after a restart, offline once stopped, renamed by --router-name, absent with --edge-port 0."""

from __future__ import annotations

import shutil

import pytest

from tests.enroll.conftest import running

pytestmark = pytest.mark.slow   # live servers started and stopped


def _router(live, name: str = "ziti-lite") -> dict:
    found = live.admin().get(f'/edge-routers?filter=name="{name}"').json()["data"]
    assert len(found) == 1, found
    return found[0]


def test_same_router_across_restarts_offline_when_stopped(template_db, tmp_path):
    db = tmp_path / "net.db"
    shutil.copy(template_db, db)
    with running(template_db, tmp_path, edge=True, db=db) as live:
        first = _router(live)
        assert first["isOnline"] is True and first["isVerified"] is True and first["roleAttributes"] == ["public"]
        assert first["versionInfo"]["version"] == "v2.0.3"
    with running(template_db, tmp_path, db=db) as live:   # no router this time: known, but offline
        again = _router(live)
        assert again["id"] == first["id"]
        assert again["isOnline"] is False and again["supportedProtocols"] == {}
        assert live.ctl.edge_router is None
    with running(template_db, tmp_path, edge=True, db=db, router_name="lab-er") as live:
        renamed = _router(live, "lab-er")
        assert renamed["id"] == first["id"] and renamed["isOnline"] is True
        assert live.admin().get('/edge-routers?filter=name="ziti-lite"').json()["data"] == []


def test_stale_terminators_of_an_earlier_process_are_dropped(template_db, tmp_path):
    db = tmp_path / "net.db"
    shutil.copy(template_db, db)
    with running(template_db, tmp_path, edge=True, db=db) as live:
        admin = live.admin()
        rid = live.ctl.edge_router.router_id
        sid = admin.create("services", {"name": "stale", "encryptionRequired": False})
    # a crash leaves a row behind (written here as the router would have)
    from ziti_lite.db.store import Store
    store = Store(str(db))
    with store.write():
        store.execute("INSERT INTO terminators (id, created_at, updated_at, service_id, router_id, binding, address)"
                      " VALUES ('t1', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', ?, ?, 'edge', 'x')",
                      (sid, rid))
    store.close()
    with running(template_db, tmp_path, edge=True, db=db) as live:
        assert live.admin().get("/terminators").json()["data"] == []


def test_a_user_may_delete_the_default_policies(template_db, tmp_path):
    with running(template_db, tmp_path) as live:
        admin = live.admin()
        for collection, name, roles in (
                ("edge-router-policies", "all-endpoints-public-routers",
                 {"identityRoles": ["#all"], "edgeRouterRoles": ["#public"]}),
                ("service-edge-router-policies", "all-routers-all-services",
                 {"serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})):
            found = admin.get(f'/{collection}?filter=name="{name}"').json()["data"]
            assert len(found) == 1 and found[0]["semantic"] == "AnyOf"
            assert {k: found[0][k] for k in roles} == roles
            assert admin.delete(f"/{collection}/{found[0]['id']}").status_code == 200
