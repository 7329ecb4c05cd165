"""The audit trail: one row per successful management-API write naming the caller, login
outcomes, the list operation, retention, the CLI and the integrity check."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.conftest import ADMIN_USER, MGMT
from ziti_lite import clock, integrity
from ziti_lite.cli import cli
from ziti_lite.db.store import Store
from ziti_lite.events import audit

AUDIT = "/ziti-lite/v1/audit"


def rows(admin, query: str = "") -> list[dict]:
    r = admin.as_prefix("").get(AUDIT + query)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_a_write_leaves_one_row_with_changed_fields(admin, ctl):
    sid = admin.create("services", {"name": "billing", "encryptionRequired": True})
    assert admin.patch(f"/services/{sid}", json={"name": "billing2"}).status_code == 200
    got = rows(admin, f'?filter=entityId="{sid}"&sort=createdAt asc')
    assert [r["operation"] for r in got] == ["createService", "patchService"]
    created, patched = got
    me = admin.get("/current-api-session").json()["data"]
    for r in got:
        assert r["identityId"] == me["identityId"] and r["identityName"] == "Default Admin"
        assert r["apiSessionId"] == me["id"] and r["remoteAddress"] == "testclient"
        assert r["entityType"] == "services" and r["entityId"] == sid
        assert {"createdAt", "identityId", "identityName", "apiSessionId", "remoteAddress", "operation",
                "entityType", "entityId", "entityName", "changes"} <= set(r)
    assert created["changes"]["name"] == {"old": None, "new": "billing"}
    assert patched["changes"] == {"name": {"old": "billing", "new": "billing2"}}
    assert patched["entityName"] == "billing2"


def test_a_refused_write_leaves_no_row(admin):
    before = len(rows(admin))
    assert admin.post("/services", json={"name": 5}).status_code == 400
    assert admin.delete("/services/nope").status_code == 404
    assert len(rows(admin)) == before


def test_every_write_route_leaves_exactly_one_row_on_success(admin, ctl):
    """Each write operation of the route list, called with an empty body: where it succeeds,
    exactly one row naming the operation and the caller; where it is refused, none."""
    routes = [r for r in ctl.router.routes if r.api == "management" and r.method in ("POST", "PUT", "PATCH", "DELETE")
              and r.op_id != "authenticate"]
    assert len(routes) > 50
    sid = admin.create("services", {"name": "target", "encryptionRequired": True})
    succeeded = 0
    for route in routes:
        if route.path in ("/current-api-session",):
            continue   # logs the admin out: covered below
        path = route.path.replace("{id}", sid)
        for name in ("{serviceId}", "{fingerprint}", "{keyId}"):
            path = path.replace(name, "x")
        count = len(rows(admin, "?limit=-1"))
        r = admin.request(route.method, path, json={})
        after = rows(admin, "?limit=-1&sort=createdAt desc")
        if 200 <= r.status_code < 300:
            succeeded += 1
            assert len(after) == count + 1, (route.op_id, r.status_code)
            assert after[0]["operation"] == route.op_id and after[0]["identityName"] == "Default Admin"
        else:
            assert len(after) == count, (route.op_id, r.status_code, r.text)
    assert succeeded >= 3   # e.g. patch and update of the service, delete of it


def test_logins_are_audited(admin, client):
    r = client.post(MGMT + "/authenticate?method=password", json={"username": ADMIN_USER, "password": "bad-pw"})
    assert r.status_code == 401
    got = rows(admin, '?filter=operation="authenticate"&sort=createdAt desc')
    assert got[0]["outcome"] == "failure" and got[0]["reason"] == "INVALID_AUTH"
    assert got[0]["identityName"] == "Default Admin" and got[0]["apiSessionId"] is None


def test_non_admins_cannot_read_it(anon):
    assert anon.as_prefix("").get(AUDIT).status_code == 401


def test_retention_by_age_and_count(admin, ctl):
    for n in range(5):
        admin.create("services", {"name": f"s{n}", "encryptionRequired": True})
    total = len(rows(admin, "?limit=-1"))
    assert audit.prune(ctl.store, days=90, max_rows=3) == total - 3
    assert len(rows(admin, "?limit=-1")) == 3
    clock.advance(91 * 86400)
    try:
        assert audit.prune(ctl.store, days=90, max_rows=100) == 3
    finally:
        clock.reset()
    assert rows(admin, "?limit=-1") == []


def test_cli_reads_and_check_verifies(admin, ctl, db_path):
    admin.create("services", {"name": "cli-svc", "encryptionRequired": True})
    out = CliRunner().invoke(cli, ["audit", "--db", str(db_path), "--entity", "services", "--identity",
                                   "Default Admin", "--since", "1h", "--json"])
    assert out.exit_code == 0, out.output
    got = [json.loads(line) for line in out.output.splitlines()]
    assert got[-1]["entityName"] == "cli-svc" and got[-1]["operation"] == "createService"
    bad = CliRunner().invoke(cli, ["audit", "--db", str(db_path), "--since", "yesterday"])
    assert bad.exit_code != 0 and "since" in bad.output
    assert not [p for p in integrity.run(ctl.store) if "audit" in p.description]
    with ctl.store.write():
        ctl.store.execute("UPDATE audit_log SET changes = 'nope'")
    assert [p for p in integrity.run(ctl.store) if "audit" in p.description]


def test_a_snapshot_keeps_the_trail(admin, ctl, tmp_path):
    admin.create("services", {"name": "snap-svc", "encryptionRequired": True})
    out = tmp_path / "snap.db"
    ctl.store.snapshot(str(out))
    copy = Store(str(out))
    try:
        assert audit.query(copy, entity="services")[-1]["entity_name"] == "snap-svc"
    finally:
        copy.close()


def test_a_hand_written_operation_on_one_entity_records_its_diff(admin):
    iid = admin.create("identities", {"name": "dora", "type": "Device", "isAdmin": False})
    assert admin.post(f"/identities/{iid}/disable", json={"durationMinutes": 5}).status_code == 200
    got = rows(admin, '?filter=operation="disableIdentity"')
    assert [(r["entityType"], r["entityId"], r["entityName"]) for r in got] == [("identities", iid, "dora")]
    assert got[0]["changes"]["disabledAt"]["old"] is None and got[0]["changes"]["disabledAt"]["new"]
