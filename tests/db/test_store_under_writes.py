"""Snapshots (CLI, API) and the integrity fix (which snapshots first) finish while other
connections write continuously. The old page-at-a-time backup restarted on every foreign write
and never finished on a database larger than one step."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time

import apsw
import pytest

from tests.test_server import REPO

pytestmark = [pytest.mark.slow, pytest.mark.checkpointer]   # writer threads and subprocesses, beside a serving app

GUARD = 60.0  # hang guard: the old code never finished at all
FILL_PAGES = 3000  # ~12 MiB of 4 KiB rows: several of the old 1,000-page steps


def _fill(db: str) -> None:
    conn = apsw.Connection(db)
    conn.setbusytimeout(5000)
    conn.execute("CREATE TABLE IF NOT EXISTS bulk (id INTEGER PRIMARY KEY, data BLOB)")
    with conn:
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
                     " INSERT INTO bulk (data) SELECT randomblob(4000) FROM n", (FILL_PAGES,))
    conn.close()


class Writers:
    """Four connections committing small transactions back to back until stopped."""

    def __init__(self, db: str, count: int = 4):
        self.db, self.stop, self.commits = db, threading.Event(), [0] * count
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(count)]

    def _run(self, i: int) -> None:
        conn = apsw.Connection(self.db)
        conn.setbusytimeout(5000)
        while not self.stop.is_set():
            with conn:
                conn.execute("INSERT INTO bulk (data) VALUES (randomblob(200))")
                conn.execute("DELETE FROM bulk WHERE id = (SELECT min(id) FROM bulk WHERE length(data) = 200)"
                             " AND (SELECT count(*) FROM bulk WHERE length(data) = 200) > 100")
            self.commits[i] += 1
            time.sleep(0.001)  # a client's round trip between two writes
        conn.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(GUARD)


def _copy_is_sound(path: str) -> int:
    conn = apsw.Connection(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute("SELECT count(*) FROM bulk").fetchone()[0]
    finally:
        conn.close()


def _run_in_thread(fn) -> None:
    error: list[BaseException] = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            error.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(GUARD)
    assert not t.is_alive(), "did not finish under continuous writes"
    if error:
        raise error[0]


def test_cli_snapshot_finishes_under_four_writers(db_path, tmp_path):
    _fill(str(db_path))
    out = tmp_path / "snap.db"
    with Writers(str(db_path)) as w:
        proc = subprocess.run([sys.executable, "-m", "ziti_lite", "snapshot", "--db", str(db_path), str(out)],
                              cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True, timeout=GUARD)
        assert proc.returncode == 0, proc.stderr
    assert sum(w.commits) > 0
    assert _copy_is_sound(str(out)) >= FILL_PAGES


def test_api_snapshot_finishes_under_four_writers(admin, db_path):
    _fill(str(db_path))
    with Writers(str(db_path)) as w:
        result = {}
        _run_in_thread(lambda: result.setdefault("r", admin.post("/database/snapshot")))
        assert result["r"].status_code == 200, result["r"].text
    assert sum(w.commits) > 0
    (snap,) = [p for p in glob.glob(str(db_path) + "-*") if not p.endswith(("-wal", "-shm", "-journal"))]
    assert _copy_is_sound(snap) >= FILL_PAGES


def test_integrity_fix_finishes_under_four_writers(admin, ctl, db_path):
    _fill(str(db_path))
    with Writers(str(db_path)):
        assert admin.post("/database/fix-data-integrity").status_code == 202
        _run_in_thread(lambda: ctl.jobs["integrity_done"].wait(GUARD))
        job = admin.get("/database/data-integrity-results").json()["data"]
    assert job["inProgress"] is False and job["error"] is None, job
    snaps = [p for p in glob.glob(str(db_path) + "-*") if not p.endswith(("-wal", "-shm", "-journal"))]
    assert len(snaps) == 1 and _copy_is_sound(snaps[0]) >= FILL_PAGES


@pytest.mark.parametrize("pages", [1, FILL_PAGES])
def test_snapshot_is_a_consistent_copy(db_path, tmp_path, pages):
    from ziti_lite.db.store import Store
    conn = apsw.Connection(str(db_path))
    conn.execute("CREATE TABLE bulk (id INTEGER PRIMARY KEY, data BLOB)")
    conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
                 " INSERT INTO bulk (data) SELECT randomblob(4000) FROM n", (pages,))
    conn.close()
    store = Store(str(db_path))
    store.snapshot(str(tmp_path / "copy.db"))
    store.close()
    assert _copy_is_sound(str(tmp_path / "copy.db")) == pages


def test_check_as_a_subprocess_runs_the_policy_checks(admin, ctl, db_path):
    """``ziti-lite check`` in a fresh process finds what the in-process check finds."""
    iid = admin.create("identities", {"name": "member", "type": "User", "isAdmin": False, "roleAttributes": ["m"]})
    admin.create("service-policies", {"name": "sp", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#m"], "serviceRoles": ["#all"]})
    conn = apsw.Connection(str(db_path))
    conn.setbusytimeout(5000)
    assert conn.execute("SELECT count(*) FROM service_policy_identities WHERE identity_id = ?", (iid,)).fetchone()[0]
    conn.execute("DELETE FROM service_policy_identities WHERE identity_id = ?", (iid,))
    conn.close()
    proc = subprocess.run([sys.executable, "-m", "ziti_lite", "check", "--db", str(db_path)],
                          cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=GUARD)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "0 problem(s)" not in proc.stdout and "fixable" in proc.stdout
