"""The Database group's integrity check finds drift in the policy engine's tables and fix repairs it."""

from __future__ import annotations

from ziti_lite import integrity


def _policy_problems(store) -> list[str]:
    return [p.description for p in integrity.run(store) if p.description.split(" ")[0] in (
        "role", "service-policies", "edge-router-policies", "service-edge-router-policies")]


def _results(admin, ctl, path: str) -> list[dict]:
    assert admin.post(path).status_code == 202
    assert ctl.jobs["integrity_done"].wait(10)
    return admin.get("/database/data-integrity-results").json()["data"]["results"] or []


def test_check_and_fix(admin, ctl, net):
    i1, i2 = net.identity("a"), net.identity("b")
    s = net.service("web")
    r = net.router("pub")
    sp = net.sp("Dial", identities=["#a"], services=["#web"])
    erp = net.erp(identities=["#all"], routers=["#pub"])
    store = ctl.store
    assert _policy_problems(store) == []

    with store.write():  # drift behind the engine's back
        store.execute("DELETE FROM service_policy_identities WHERE policy_id = ?", (sp,))
        store.execute(
            "INSERT INTO service_policy_identities (policy_id, identity_id, type) VALUES (?, ?, 'Dial')", (sp, i2)
        )
        store.execute("DELETE FROM edge_router_policy_routers WHERE policy_id = ?", (erp,))
        store.execute("DELETE FROM entity_role_attributes WHERE entity_id = ?", (i1,))
        store.execute(
            "INSERT INTO policy_roles (kind, side, role, policy_id) VALUES ('sp', 'identity', '#zzz', ?)", (sp,)
        )
    found = _results(admin, ctl, "/database/check-data-integrity")
    texts = [x["description"] for x in found]
    assert any(
        t.startswith(f"service-policies {sp}: identityRoles selects 1 identities that are not linked and 1")
        for t in texts
    )
    assert any(t.startswith(f"edge-router-policies {erp}: edgeRouterRoles") for t in texts)
    assert any(t.startswith("role attribute index of identities: 1 missing") for t in texts)
    assert any(t.startswith("role index of service-policies") for t in texts)
    assert not any(x["fixed"] for x in found)

    fixed = _results(admin, ctl, "/database/fix-data-integrity")
    assert {x["description"] for x in fixed} >= set(texts) - {
        t for t in texts if not t.startswith(("role", "service-", "edge-"))
    }
    assert all(x["fixed"] for x in fixed if x["description"] in texts)
    assert _policy_problems(store) == []
    assert net.ids(f"/identities/{i1}/services") == {s}
    assert net.ids(f"/identities/{i2}/services") == set()
    assert net.ids(f"/identities/{i2}/edge-routers") == {r}


def test_stale_rows_of_a_deleted_policy(admin, ctl, net):
    net.identity("a")
    sp = net.sp("Dial", identities=["#a"])
    store = ctl.store
    store.execute("PRAGMA foreign_keys = OFF")
    try:
        with store.write():
            store.execute("DELETE FROM service_policies WHERE id = ?", (sp,))
    finally:
        store.execute("PRAGMA foreign_keys = ON")
    problems = [p for p in integrity.run(store, fix=True) if p.description.startswith("service-policies")]
    assert problems and all(p.fixed for p in problems)
    assert store.value("SELECT count(*) FROM service_policy_identities WHERE policy_id = ?", (sp,)) == 0
