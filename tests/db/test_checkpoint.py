"""WAL checkpoints off the request path: while the app's lifespan runs, the serving connection
never checkpoints in a COMMIT; a worker thread copies the log into the database file, keeps it
bounded, and empties it at shutdown without losing a row."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import apsw
import httpx
import pytest
from starlette.testclient import TestClient

from tests.conftest import Api
from tests.test_server import PASSWORD, Server
from ziti_lite.db import checkpoint
from ziti_lite.db.checkpoint import Checkpointer
from ziti_lite.db.store import Store

pytestmark = pytest.mark.checkpointer   # the app fixture runs the checkpointer thread here

DEADLINE = 30.0


def wait_for(cond, what: str):
    """Poll ``cond`` until it is true; fail after a generous deadline (never a timed assertion)."""
    end = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.01)


def wal_size(db) -> int:
    path = f"{db}-wal"
    return os.path.getsize(path) if os.path.exists(path) else 0


def rows_in_main_file(db, tmp_path, sql: str):
    """Open a copy of the database file alone (no -wal beside it): what a checkpoint put there."""
    copy = tmp_path / "main-only.db"
    shutil.copyfile(db, copy)
    conn = apsw.Connection(str(copy))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def _add(store, n: int) -> None:
    with store.write():
        store.execute("INSERT INTO identity_types (id, created_at, updated_at, name) VALUES (?, 't', 't', ?)",
                      (f"t{n}", f"type-{n}-" + "x" * 3000))


def test_lifespan_moves_checkpoints_to_a_worker_thread(app, ctl):
    assert ctl.store.value("PRAGMA wal_autocheckpoint") == 1000   # a Store alone (CLI): SQLite's default
    assert ctl.checkpointer is None
    with TestClient(app):
        assert ctl.store.value("PRAGMA wal_autocheckpoint") == 0
        assert ctl.checkpointer.running
        thread = ctl.checkpointer._thread
        assert thread.name == "ziti-lite-checkpoint" and thread.is_alive()
        assert thread is not threading.current_thread()
        with TestClient(app):          # a second lifespan at once (two clients on one app)
            assert ctl.checkpointer._thread is thread
        assert thread.is_alive() and ctl.store.value("PRAGMA wal_autocheckpoint") == 0
    assert not ctl.checkpointer.running and not thread.is_alive()
    assert ctl.store.value("PRAGMA wal_autocheckpoint") == 1000


def test_writes_through_the_api_are_checkpointed_in_the_background(app, ctl, db_path, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "PAGES", 20)
    monkeypatch.setattr(checkpoint, "REWIND_PAGES", 100)
    monkeypatch.setattr(checkpoint, "SIZE_LIMIT", 0)
    frame = ctl.store.value("PRAGMA page_size") + 24
    names = []
    with TestClient(app) as c:
        admin = Api(c).login()
        ck = ctl.checkpointer

        def write():
            names.append(f"ckpt-{len(names)}")
            admin.create("identities", {"name": names[-1], "type": "User", "isAdmin": False,
                                        "roleAttributes": ["a" * 200, "b" * 200], "appData": {"k": "v" * 2000}})
            return wal_size(db_path)

        # 1. the passes copy what requests commit, and the log keeps being rewound: the file
        # stays at a fraction of what was written
        peak = 0
        end = time.monotonic() + DEADLINE
        while ck.passes < 20:   # each pass follows >= 20 new frames: >= 400 frames written
            assert time.monotonic() < end, f"only {ck.passes} checkpoints after {len(names)} writes"
            peak = max(peak, write())
        assert ck.last[1] > 0, "the passive passes copied frames"
        assert 0 < peak < 400 * frame

        # 2. a slow reader (a snapshot, say) keeps its old pages in the log: nothing can rewind
        # it meanwhile, but writes go on; once the reader has gone, a pass copies everything, a
        # write rewinds the log and the file is trimmed
        reader = apsw.Connection(str(db_path))
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM identities").fetchall()
            grown = 0
            while grown < 150 * frame:
                assert time.monotonic() < end, f"the log did not grow past the reader ({ck.__dict__})"
                grown = write()
            wait_for(lambda: ck.last[1] < ck.last[0], "a pass stopped short of the reader's snapshot")
        finally:
            reader.execute("COMMIT")
            reader.close()
        wait_for(lambda: write() < grown, "the WAL file to shrink")
        assert admin.get(f'/identities?filter=name="{names[-1]}"').json()["meta"]["pagination"]["totalCount"] == 1
    ctl.store.close()
    assert rows_in_main_file(db_path, tmp_path, "SELECT count(*) FROM identities WHERE name LIKE 'ckpt-%'") == len(
        names
    )


def test_shutdown_copies_the_whole_log_into_the_database_file(app, ctl, db_path, tmp_path):
    with TestClient(app) as c:
        admin = Api(c).login()
        ids = [admin.create("identities", {"name": f"keep-{i}", "type": "User", "isAdmin": False}) for i in range(30)]
        assert wal_size(db_path) > 0  # below the threshold: still in the log while serving
    assert ctl.checkpointer.final == (0, 0)
    assert wal_size(db_path) == 0
    assert rows_in_main_file(db_path, tmp_path, "SELECT count(*) FROM identities WHERE name LIKE 'keep-%'") == 30
    ctl.store.close()
    again = Store(str(db_path))
    try:
        assert sorted(again.column("SELECT id FROM identities WHERE name LIKE 'keep-%'")) == sorted(ids)
    finally:
        again.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "big_commit, rewind_pages, max_pages, limit",
    [
        (4096, 40, None, 40),  # past rewind_pages the next write waits for the pass, rewinds
        (2, 10**6, None, 0),  # every commit is "big": it waits for its own copy
        (10**6, 10**6, 60, 60),  # neither: the commit that reaches max_pages waits
    ],
    ids=["next-write-waits", "big-commit-waits", "bound-reached"],
)
def test_writes_back_to_back_keep_the_log_bounded(tmp_path, monkeypatch, big_commit, rewind_pages, max_pages, limit):
    """No pause between commits, so no pass ever finishes before the next write begins: left
    alone the log would never be rewound (it reached 160,000 frames here)."""
    monkeypatch.setattr(checkpoint, "SIZE_LIMIT", 0)
    monkeypatch.setattr(checkpoint, "BIG_COMMIT", big_commit)
    store = Store(str(tmp_path / "s.db"))
    store.conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    frame = store.value("PRAGMA page_size") + 24
    ck = Checkpointer(store, pages=5, rewind_pages=rewind_pages, max_pages=max_pages)
    assert ck.start() and store.before_write is not None
    peak = n = 0
    try:
        while ck.waits < 20 or n < 1000:  # every commit adds one frame at least
            assert n < 20000, f"writes never waited to rewind the log ({ck.__dict__})"
            _add(store, n)
            n += 1
            peak = max(peak, wal_size(store.path))
        assert peak <= (limit + 20) * frame + 32, "about the limit, plus a commit or two"
        assert n * frame > 4 * peak, "far less than was written"
        assert ck.passes > 0 and ck.last[1] > 0
    finally:
        ck.stop()
    assert store.before_write is None and ck.final == (0, 0) and wal_size(store.path) == 0
    store.close()
    assert rows_in_main_file(store.path, tmp_path, "SELECT count(*) FROM identity_types WHERE id LIKE 't%'") == n


def test_store_outside_a_lifespan_is_unchanged(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    try:
        ck = Checkpointer(store)
        ck.stop()  # never started: nothing to do
        assert store.value("PRAGMA wal_autocheckpoint") == 1000
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM], ids=["SIGTERM"])
def test_server_stopped_by_a_signal_leaves_no_log_behind(tmp_path, sig):
    db = tmp_path / "served.db"
    s = Server(db, "--admin-password", PASSWORD)
    try:
        s.wait_ready()
        with httpx.Client(base_url=s.base, verify=False, timeout=10) as c:
            r = c.post(
                "/edge/management/v1/authenticate?method=password", json={"username": "admin", "password": PASSWORD}
            )
            h = {"zt-session": r.json()["data"]["token"]}
            for i in range(25):
                r = c.post(
                    "/edge/management/v1/identities",
                    headers=h,
                    json={"name": f"served-{i}", "type": "User", "isAdmin": False},
                )
                assert r.status_code == 201, r.text
        assert wal_size(db) > 0
    finally:
        code = s.stop(sig)
    assert code == 0, s.output
    assert wal_size(db) == 0, s.output
    assert rows_in_main_file(db, tmp_path, "SELECT count(*) FROM identities WHERE name LIKE 'served-%'") == 25


def wal_salts(db) -> bytes:
    """The WAL header's salts: they change whenever the log is restarted from its start."""
    with open(f"{db}-wal", "rb") as f:
        return f.read(32)[16:24]


def test_the_checkpointer_never_restarts_the_log_under_litestream(app, ctl, db_path, monkeypatch):
    """Litestream copies the WAL's frames to its replicas and holds a read transaction so nobody
    restarts the log before it has them; it runs its own checkpoints. While serving, ours are
    PASSIVE only (they copy frames up to that reader's snapshot and never wait for it or restart
    the log), and so is the shutdown's on a file Litestream replicates (a TRUNCATE would wait for
    its read lock; on any other file it empties the log, below)."""
    monkeypatch.setattr(checkpoint, "PAGES", 20)
    monkeypatch.setattr(checkpoint, "REWIND_PAGES", 100)     # the rewind logic at work throughout
    modes: list[tuple[int, bool]] = []
    real = Checkpointer._checkpoint

    def spy(self, conn, mode):
        modes.append((mode, self._stopping))
        return real(self, conn, mode)
    monkeypatch.setattr(Checkpointer, "_checkpoint", spy)
    with TestClient(app) as c:
        admin = Api(c).login()
        ck = ctl.checkpointer
        admin.create("identities", {"name": "first", "type": "User", "isAdmin": False})
        litestream = apsw.Connection(str(db_path))      # Litestream's read lock, as it takes it
        litestream.execute("CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER)")
        litestream.execute("BEGIN")
        litestream.execute("SELECT COUNT(1) FROM _litestream_seq").fetchall()
        salts, size = wal_salts(db_path), wal_size(db_path)
        try:
            for i in range(120):
                admin.create("identities", {"name": f"ls-{i}", "type": "User", "isAdmin": False,
                                            "appData": {"k": "v" * 2000}})
            wait_for(lambda: ck.passes >= 3, "passive checkpoints under the reader")
            assert wal_salts(db_path) == salts, "the log was restarted under Litestream's read lock"
            assert wal_size(db_path) > size and ck.busy == 0
        finally:
            litestream.execute("COMMIT")
            litestream.close()
    # while serving, and at shutdown on a file Litestream replicates (its table is there): passive only
    assert modes and {mode for mode, _ in modes} == {apsw.SQLITE_CHECKPOINT_PASSIVE}
    assert any(stopping for _, stopping in modes) and ck.busy == 0
