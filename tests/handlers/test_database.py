"""The Database group: integrity check (202, background, one at a time), fix, snapshot."""

from __future__ import annotations

import glob
import os
import threading

import apsw
import pytest

from tests.conftest import Api, assert_error
from ziti_lite import integrity

HOST = "NH5p4FpGR"


def wait_done(ctl) -> None:
    assert ctl.jobs["integrity_done"].wait(10), "integrity job did not finish"


def results(admin) -> dict:
    r = admin.get("/database/data-integrity-results")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"]["pagination"]["limit"] == -1 and body["meta"]["pagination"]["offset"] == 0
    assert body["meta"]["filterableFields"] == []
    data = body["data"]
    assert set(data) == {"inProgress", "fixingErrors", "tooManyErrors", "startTime", "endTime", "error", "results"}
    assert body["meta"]["pagination"]["totalCount"] == len(data["results"] or [])
    return data


def break_service_configs(db_path) -> tuple[str, str]:
    """Behind the server's back: delete a config with foreign keys off, leaving a service
    pointing at it (both in services.configs and in service_configs)."""
    conn = apsw.Connection(str(db_path))
    conn.setbusytimeout(5000)
    conn.execute("PRAGMA foreign_keys = OFF")
    sid, cid = conn.execute("SELECT service_id, config_id FROM service_configs LIMIT 1").fetchone()
    conn.execute("DELETE FROM configs WHERE id = ?", (cid,))
    conn.close()
    return sid, cid


@pytest.fixture
def blocker():
    """An extra integrity check that holds the scan until released, to observe it running."""
    release, started = threading.Event(), threading.Event()

    def held(store):
        started.set()
        release.wait(10)
        return iter(())
    integrity.CHECKS.append(held)
    yield release, started
    release.set()
    integrity.CHECKS.remove(held)


def test_results_before_any_run(admin):
    data = results(admin)
    assert data == {"inProgress": False, "fixingErrors": False, "tooManyErrors": False, "startTime": None,
                    "endTime": None, "error": None, "results": None}


def test_check_of_a_clean_database(admin, ctl):
    r = admin.post("/database/check-data-integrity")
    assert r.status_code == 202 and r.json() == {"data": {}, "meta": {}}
    wait_done(ctl)
    data = results(admin)
    assert data["inProgress"] is False and data["fixingErrors"] is False and data["error"] is None
    assert data["results"] is None, data
    assert data["startTime"] and data["endTime"] >= data["startTime"]


def test_second_run_while_one_is_running_is_429(admin, ctl, blocker):
    release, started = blocker
    assert admin.post("/database/check-data-integrity").status_code == 202
    assert started.wait(10)
    assert results(admin)["inProgress"] is True
    assert_error(admin.post("/database/check-data-integrity"), 429, "RATE_LIMITED")
    assert_error(admin.post("/database/fix-data-integrity"), 429, "RATE_LIMITED")
    assert admin.get("/identities").status_code == 200, "the server keeps serving during a scan"
    release.set()
    wait_done(ctl)
    assert results(admin)["inProgress"] is False
    assert admin.post("/database/check-data-integrity").status_code == 202
    wait_done(ctl)


def test_check_then_fix_a_broken_row(admin, ctl, db_path):
    cid = admin.create("configs", {"name": "doomed", "configTypeId": HOST,
                                   "data": {"protocol": "tcp", "address": "x", "port": 1}})
    sid = admin.create("services", {"name": "svc", "encryptionRequired": True, "configs": [cid]})
    break_service_configs(db_path)

    assert admin.post("/database/check-data-integrity").status_code == 202
    wait_done(ctl)
    data = results(admin)
    assert data["results"], data
    assert all(p["fixed"] is False for p in data["results"])
    assert any(cid in p["description"] for p in data["results"]) or any(
        sid in p["description"] for p in data["results"]
    )

    assert admin.post("/database/fix-data-integrity").status_code == 202
    wait_done(ctl)
    data = results(admin)
    assert data["fixingErrors"] is True and data["results"] and all(p["fixed"] for p in data["results"])
    assert glob.glob(f"{db_path}-*"), "a fix writes a snapshot first"

    assert admin.post("/database/check-data-integrity").status_code == 202
    wait_done(ctl)
    assert results(admin)["results"] is None
    assert admin.get(f"/services/{sid}").json()["data"]["configs"] is None  # no list: null, as upstream


def test_snapshot(admin, ctl, db_path):
    admin.create("identities", {"name": "in-the-snapshot", "type": "User", "isAdmin": False})
    r = admin.post("/database/snapshot")
    assert r.status_code == 200 and r.json() == {"data": {}, "meta": {}}
    files = [f for f in glob.glob(f"{db_path}-*") if not f.endswith(("-wal", "-shm"))]
    assert len(files) == 1 and os.path.basename(files[0])[len("net.db-") :].replace("-", "").isdigit()
    conn = apsw.Connection(files[0], flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("SELECT count(*) FROM identities WHERE name = 'in-the-snapshot'").fetchone()[0] == 1
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert_error(admin.post("/database/snapshot"), 429, "RATE_LIMITED")


def test_database_group_is_admin_only(admin, anon):
    iid = admin.create("identities", {"name": "dbuser", "type": "User", "isAdmin": False})
    admin.create(
        "authenticators", {"method": "updb", "identityId": iid, "username": "dbuser", "password": "Secret-pw1"}
    )
    user = Api(admin.client, admin.prefix).login("dbuser", "Secret-pw1")
    for who in (anon, user):
        assert_error(who.post("/database/check-data-integrity"), 401, "UNAUTHORIZED")
        assert_error(who.post("/database/fix-data-integrity"), 401, "UNAUTHORIZED")
        assert_error(who.get("/database/data-integrity-results"), 401, "UNAUTHORIZED")
        assert_error(who.post("/database/snapshot"), 401, "UNAUTHORIZED")
