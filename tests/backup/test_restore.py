"""``ziti-lite restore``: refused while a server holds the file, refused for a file that is not a
ziti-lite database, fails SQLite's integrity check or comes from a newer ziti-lite; the replaced
file kept aside (with its log's rows); an older snapshot accepted and upgraded at the next start;
the restored file is the same controller (its PKI, its admin)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, Api
from ziti_lite.app import create_app
from ziti_lite.cli import cli
from ziti_lite.config import Settings
from ziti_lite.db import lock as dblock
from ziti_lite.db.store import SCHEMA_VERSION, Store

DATA = Path(__file__).resolve().parents[1] / "data"


def invoke(*args: str):
    return CliRunner().invoke(cli, ["restore", *args])


def count(path, sql: str, params=()):
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


def named(path, name: str) -> int:
    return count(path, "SELECT count(*) FROM identities WHERE name = ?", (name,))


@pytest.fixture
def snap(admin, db_path, tmp_path):
    """A snapshot with identity 'before' in it; then 'after' is created in the live file."""
    admin.create("identities", {"name": "before", "type": "User", "isAdmin": False})
    out = tmp_path / "snap.db"
    assert CliRunner().invoke(cli, ["snapshot", "--db", str(db_path), str(out)]).exit_code == 0
    admin.create("identities", {"name": "after", "type": "User", "isAdmin": False})
    return out


def test_restore_puts_the_snapshot_back_and_keeps_the_replaced_file_aside(snap, ctl, db_path):
    assert os.path.getsize(f"{db_path}-wal") > 0      # 'after' is in the log of the (stopped) server
    ctl.store.close()
    r = invoke("--db", str(db_path), str(snap))
    assert r.exit_code == 0, r.output
    assert f"restored {db_path} from {snap}:" in r.output
    assert named(db_path, "before") == 1 and named(db_path, "after") == 0
    assert count(db_path, "PRAGMA integrity_check") == "ok"
    asides = [p for p in os.listdir(db_path.parent) if p.startswith("net.db.replaced-")]
    assert len(asides) == 1 and f"kept as {db_path}.replaced-" in r.output
    aside = db_path.parent / asides[0]
    # the set-aside file stands alone, its log's rows in it
    assert not os.path.exists(f"{aside}-wal")
    assert named(aside, "after") == 1 and count(aside, "PRAGMA integrity_check") == "ok"
    assert not os.path.exists(f"{db_path}.restoring")


def test_the_restored_file_is_the_same_controller(snap, ctl, db_path):
    pki = {k: ctl.state[k] for k in ("root_cert", "signer_cert", "instance_id")}
    ctl.store.close()
    assert invoke("--db", str(db_path), str(snap)).exit_code == 0
    app = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                              checkpointer=False))
    restored = app.state.controller
    try:
        assert {k: restored.state[k] for k in pki} == pki
        with TestClient(app) as client:
            api = Api(client).login()
            names = {i["name"] for i in api.get("/identities?limit=500").json()["data"]}
            assert "before" in names and "after" not in names
    finally:
        restored.store.close()


def test_refused_while_a_server_holds_the_file(snap, ctl, db_path):
    held = dblock.acquire(str(db_path))       # what `ziti-lite serve` holds while it runs
    try:
        r = invoke("--db", str(db_path), str(snap))
    finally:
        dblock.release(held)
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "being served by another ziti-lite process" in lines[0]
    assert "stop that server first" in lines[0]
    assert named(db_path, "after") == 1                                       # nothing changed
    assert not [p for p in os.listdir(db_path.parent) if ".replaced-" in p or p.endswith(".restoring")]


def files(folder) -> list[str]:
    """The folder's files but the serving lock's (left by every server and restore, as it may)."""
    return sorted(p for p in os.listdir(folder) if not p.endswith(".lock"))


def refused(db_path, snapshot, says: str) -> None:
    before = files(db_path.parent)
    r = invoke("--db", str(db_path), str(snapshot))
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.output
    assert files(db_path.parent) == before
    assert named(db_path, "after") == 1


def test_refuses_a_file_that_is_not_sqlite(snap, ctl, db_path, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is no database at all" * 200)
    ctl.store.close()
    refused(db_path, junk, "is not an SQLite database")


def test_refuses_an_sqlite_file_of_another_application(snap, ctl, db_path, tmp_path):
    other = tmp_path / "other.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.close()
    ctl.store.close()
    refused(db_path, other, "is not a ziti-lite database")


def test_refuses_a_snapshot_of_a_newer_ziti_lite(snap, ctl, db_path):
    conn = apsw.Connection(str(snap))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    ctl.store.close()
    refused(db_path, snap, f"was written by a newer ziti-lite (schema version {SCHEMA_VERSION + 1}")


def test_refuses_a_snapshot_that_fails_the_integrity_check(snap, ctl, db_path):
    conn = apsw.Connection(str(snap))
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'identities'").fetchone()[0]
    conn.close()
    with open(snap, "r+b") as f:     # the identities table's root page overwritten
        f.seek((root - 1) * page)
        f.write(b"\x0d" + b"\xff" * (page - 1))
    ctl.store.close()
    refused(db_path, snap, "restore an older snapshot or another copy")


def test_refuses_the_database_itself(ctl, db_path):
    ctl.store.close()
    r = invoke("--db", str(db_path), str(db_path))
    assert r.exit_code == 1 and "is the database itself" in r.output


def test_an_older_snapshot_is_upgraded_at_the_next_start(ctl, db_path, tmp_path):
    old = tmp_path / "v6.db"
    with gzip.open(DATA / "net-v6.db.gz", "rb") as src, open(old, "wb") as dst:
        shutil.copyfileobj(src, dst)
    identities = count(old, "SELECT count(*) FROM identities")
    ctl.store.close()
    r = invoke("--db", str(db_path), str(old))
    assert r.exit_code == 0, r.output
    assert "(schema version 6)" in r.output and f"upgrades it to schema version {SCHEMA_VERSION}" in r.output
    assert count(db_path, "PRAGMA user_version") == 6                 # as it was, until a server starts
    store = Store(str(db_path))
    try:
        assert store.value("PRAGMA user_version") == SCHEMA_VERSION
        assert store.value("SELECT count(*) FROM identities") == identities
    finally:
        store.close()
    assert [p for p in os.listdir(db_path.parent) if p.startswith("net.db.pre-6-")]


def test_restore_onto_a_new_machine_needs_no_file_there(snap, tmp_path):
    fresh = tmp_path / "new-box" / "net.db"
    fresh.parent.mkdir()
    r = invoke("--db", str(fresh), str(snap))
    assert r.exit_code == 0, r.output
    assert "kept as" not in r.output and named(fresh, "before") == 1
    missing = tmp_path / "nowhere" / "net.db"
    r = invoke("--db", str(missing), str(snap))
    assert r.exit_code == 1 and "no directory" in r.output


@pytest.mark.slow
def test_refused_while_ziti_lite_serve_runs_on_the_file(admin_template, tmp_path):
    """The same refusal with a real ``ziti-lite serve`` holding the file; once it has stopped the
    restore goes through."""
    from ziti_lite import testing

    db = tmp_path / "net.db"
    shutil.copy(admin_template[0], db)
    snapshot = tmp_path / "snap.db"
    assert CliRunner().invoke(cli, ["snapshot", "--db", str(db), str(snapshot)]).exit_code == 0
    server = testing.start(db, ADMIN_PASSWORD, edge=False)
    try:
        server.client.create_identity("while-serving")
        r = invoke("--db", str(db), str(snapshot))
        assert r.exit_code == 1 and f"(pid {server.proc.pid})" in r.output and "stop that server first" in r.output
    finally:
        assert server.stop() == 0
    assert named(db, "while-serving") == 1
    r = invoke("--db", str(db), str(snapshot))
    assert r.exit_code == 0, r.output
    assert named(db, "while-serving") == 0
