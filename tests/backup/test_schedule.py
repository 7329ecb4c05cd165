"""Timed snapshots (``serve --snapshot-every``): names by time, retention, the schedule across
restarts, failures logged once with their fix and counted, and what /metrics and /health-checks
show of them while the API keeps answering."""

from __future__ import annotations

import errno
import logging
import os
import time

import apsw
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, Api
from ziti_lite import clock
from ziti_lite.app import create_app
from ziti_lite.backup import schedule
from ziti_lite.backup.schedule import Snapshotter
from ziti_lite.cli import cli
from ziti_lite.config import Settings

T0 = 1_800_000_000.0   # 2027-01-15T08:00:00Z


class Clock:
    def __init__(self, t: float = T0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def rows(path, sql: str):
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def wait_for(cond, what: str, deadline: float = 30.0):
    end = time.monotonic() + deadline
    while not cond():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("15m", 900), ("1h30m", 5400), ("1d", 86400),
                                               ("500ms", 0.5), ("42", 42), (" 2H ", 7200)])
def test_durations(text, seconds):
    assert clock.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1w", "-5s", "0", "15 m", "1h-2m"])
def test_bad_durations_say_what_is_accepted(text):
    with pytest.raises(ValueError, match="duration"):
        clock.parse_duration(text)


def test_serve_refuses_a_bad_interval_before_opening_anything(tmp_path):
    r = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), "--snapshot-every", "often"])
    assert r.exit_code == 2 and "90s, 15m, 1h30m or 1d" in r.output
    assert not (tmp_path / "x.db").exists()
    r = CliRunner().invoke(cli, ["serve", "--help"])
    assert "--snapshot-every" in r.output and "--snapshot-keep" in r.output and "--snapshot-dir" in r.output


def test_a_snapshot_is_named_by_time_whole_and_consistent(admin, db_path, tmp_path):
    admin.create("identities", {"name": "in-the-snapshot", "type": "User", "isAdmin": False})
    now = Clock()
    snaps = Snapshotter(str(db_path), 3600, str(tmp_path), keep=5, now=now)
    outcome = snaps.take()
    assert outcome.ok and outcome.path == str(tmp_path / "net-20270115T080000.000Z.db")
    assert os.listdir(tmp_path) == ["net-20270115T080000.000Z.db"]     # no partial file left
    assert rows(outcome.path, "SELECT count(*) FROM identities WHERE name = 'in-the-snapshot'") == 1
    assert snaps.ok == 1 and snaps.last_good == T0 and snaps.error is None
    now.t += 12.5
    assert snaps.age() == 12.5
    assert schedule.taken_at(os.path.basename(outcome.path)) == T0


def test_the_oldest_beyond_keep_are_removed_and_nothing_else(db_path, tmp_path):
    others = ["net.db", "net-notes.txt", "other-20270115T080000.000Z.db", "net-20270115T080000.000Z.db.bak",
              "net.db.pre-6-20270101T000000000000Z"]
    for name in others:
        (tmp_path / name).write_text("not a snapshot of net.db")
    now = Clock()
    snaps = Snapshotter(str(db_path), 60, str(tmp_path), keep=3, now=now)
    taken = []
    for _ in range(5):
        taken.append(os.path.basename(snaps.take().path or ""))
        now.t += 60
    assert schedule.listing(str(tmp_path), str(db_path)) == taken[-3:]
    assert sorted(os.listdir(tmp_path)) == sorted(others + taken[-3:])


def test_the_schedule_counts_from_the_newest_snapshot_across_restarts(db_path, tmp_path):
    now = Clock()
    first = Snapshotter(str(db_path), 600, str(tmp_path), now=now)
    assert first.due() == 600          # nothing in the folder: due at once
    first.take()
    assert first.due() == T0 + 600
    now.t += 100                       # a restart 100 s later: the next one is still due at T0 + 600
    second = Snapshotter(str(db_path), 600, str(tmp_path), now=now)
    second._find_newest()
    assert second.due() == T0 + 600 and second.last_good == T0 and second.age() == 100


def test_a_missing_folder_is_a_failure_logged_once_with_its_fix(db_path, tmp_path, caplog):
    folder = tmp_path / "backup-disk"
    now = Clock()
    snaps = Snapshotter(str(db_path), 3600, str(folder), now=now)
    with caplog.at_level(logging.INFO, logger="ziti_lite.snapshots"):
        for _ in range(3):
            outcome = snaps.take()
            now.t += 60
    assert not outcome.ok and f"{folder} does not exist: create it" in (outcome.error or "")
    assert not folder.exists()          # never created: it may be an unmounted disk's mount point
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "create it" in errors[0].getMessage()
    assert snaps.failed == 3 and snaps.ok == 0 and snaps.failing_since == T0
    assert snaps.due() == T0 + 120 + 60    # retried within a minute, not an hour
    with pytest.raises(RuntimeError, match="does not exist"):
        snaps.health()
    folder.mkdir()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ziti_lite.snapshots"):
        assert snaps.take().ok
    assert snaps.error is None and "snapshots work again" in caplog.text
    assert "newest snapshot net-" in snaps.health()


def test_the_default_folder_is_made_beside_the_database(db_path):
    snaps = Snapshotter(str(db_path), 3600)
    assert snaps.take().ok
    assert snaps.folder == str(db_path.parent / "snapshots") and len(os.listdir(snaps.folder)) == 1


@pytest.mark.parametrize(("error", "says"), [
    (apsw.FullError("database or disk is full"), "is full: free space there"),
    (OSError(errno.ENOSPC, "No space left on device"), "is full: free space there"),
    (PermissionError(errno.EACCES, "Permission denied"), "may not write to"),
    (apsw.CantOpenError("unable to open database file"), "may not write to"),
])
def test_a_full_disk_or_no_permission_names_the_fix(db_path, tmp_path, monkeypatch, error, says):
    def fail(db, folder, when):
        raise error
    monkeypatch.setattr(schedule, "write_snapshot", fail)
    snaps = Snapshotter(str(db_path), 3600, str(tmp_path))
    outcome = snaps.take()
    assert not outcome.ok and says in (outcome.error or "") and str(tmp_path) in (outcome.error or "")


def test_a_failed_snapshot_leaves_no_partial_file(db_path, tmp_path, monkeypatch):
    real = schedule.Store.snapshot

    def half(store, out):
        real(store, out)
        raise apsw.FullError("database or disk is full")
    monkeypatch.setattr(schedule.Store, "snapshot", half)
    outcome = Snapshotter(str(db_path), 3600, str(tmp_path)).take()
    assert not outcome.ok and os.listdir(tmp_path) == []


def served(db_path, **settings):
    return create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                               checkpointer=False, **settings))


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_serving_takes_the_first_snapshot_at_start_and_reports_it(db_path, tmp_path):
    app = served(db_path, snapshot_every=3600.0, snapshot_dir=str(tmp_path), snapshot_keep=2)
    ctl = app.state.controller
    try:
        with TestClient(app) as client:
            wait_for(lambda: ctl.snapshots.ok == 1, "the first snapshot")
            text = client.get("/metrics").text
            assert 'ziti_lite_snapshots_total{result="success"} 1' in text
            assert 'ziti_lite_snapshots_total{result="failure"} 0' in text
            assert 0 <= (metric(text, "ziti_lite_snapshot_age_seconds") or -1) < 60
            assert metric(text, "ziti_lite_snapshot_failing") == 0
            checks = {c["id"]: c for c in client.get("/health-checks").json()["data"]["checks"]}
            assert checks["snapshots"]["healthy"] and "every 1h, keeping 2" in checks["snapshots"]["details"]
        assert not ctl.snapshots.started
    finally:
        ctl.store.close()
    assert len(schedule.listing(str(tmp_path), str(db_path))) == 1


def test_a_failing_snapshot_is_unhealthy_counted_and_the_api_keeps_serving(db_path, tmp_path):
    app = served(db_path, snapshot_every=3600.0, snapshot_dir=str(tmp_path / "unmounted"))
    ctl = app.state.controller
    try:
        with TestClient(app) as client:
            wait_for(lambda: ctl.snapshots.failed == 1, "the first attempt")
            text = client.get("/metrics").text
            assert 'ziti_lite_snapshots_total{result="failure"} 1' in text
            assert metric(text, "ziti_lite_snapshot_failing") == 1
            assert metric(text, "ziti_lite_snapshot_age_seconds") is None
            health = client.get("/health-checks").json()["data"]
            snap = next(c for c in health["checks"] if c["id"] == "snapshots")
            assert not health["healthy"] and not snap["healthy"] and "create it" in snap["err"]
            api = Api(client).login()
            assert api.post("/identities", json={"name": "still-serving", "type": "User",
                                                 "isAdmin": False}).status_code == 201
    finally:
        ctl.store.close()


def test_without_snapshot_every_there_is_no_check_and_no_samples(app):
    with TestClient(app) as client:
        text = client.get("/metrics").text
        assert "# TYPE ziti_lite_snapshots_total counter" in text and "ziti_lite_snapshots_total{" not in text
        assert "snapshots" not in {c["id"] for c in client.get("/health-checks").json()["data"]["checks"]}


def test_the_options_and_their_environment_variables_reach_the_settings(tmp_path, monkeypatch):
    from ziti_lite import server
    seen = []
    monkeypatch.setattr(server, "serve", lambda settings, log_level: seen.append(settings))
    monkeypatch.setattr("signal.signal", lambda *args: None)     # serve's handlers stay out of pytest
    env = {"ZITI_LITE_SNAPSHOT_EVERY": "1h30m", "ZITI_LITE_SNAPSHOT_DIR": str(tmp_path),
           "ZITI_LITE_SNAPSHOT_KEEP": "7"}
    r = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path / "x.db")], env=env)
    assert r.exit_code == 0, r.output
    assert (seen[0].snapshot_every, seen[0].snapshot_dir, seen[0].snapshot_keep) == (5400.0, str(tmp_path), 7)
    r = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), "--snapshot-every", "15m"])
    assert r.exit_code == 0 and seen[1].snapshot_every == 900.0 and seen[1].snapshot_dir is None
    r = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), "--snapshot-dir", str(tmp_path)])
    assert r.exit_code == 2 and "without --snapshot-every" in r.output
