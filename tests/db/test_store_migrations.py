"""Safe migrations (``Store.migrate``): a database of every earlier schema version
(``tests/data/net-v<N>.db.gz``, made by ``tests/data/make_schema_fixtures.py``) migrates to the
schema of a fresh file without losing a row; a file made from every earlier ``schema.sql``
(``tests/data/schema-v<N>.sql``) and migrated equals a fresh one (``sqlite_master`` and the row
count of every table: rows a migration seeds); a snapshot of the old file is written beside it
first (the last few kept); a failing migration leaves the file as it was; tables ziti-lite does
not know survive starts and migrations."""

from __future__ import annotations

import glob
import gzip
import shutil
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from ziti_lite.app import create_app
from ziti_lite.cli import cli
from ziti_lite.config import Settings
from ziti_lite.db import store as store_module
from ziti_lite.db.store import KEEP_SNAPSHOTS, SCHEMA_VERSION, Store

DATA = Path(__file__).parents[1] / "data"
FIXTURES = {int(p.name.removeprefix("net-v").removesuffix(".db.gz")): p for p in DATA.glob("net-v*.db.gz")}
SCHEMAS = {int(p.stem.removeprefix("schema-v")): p for p in DATA.glob("schema-v*.sql")}


def unpack(version: int, to: Path) -> Path:
    out = to / "net.db"
    with gzip.open(FIXTURES[version], "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def schema(path) -> list[tuple]:
    conn = apsw.Connection(str(path))
    try:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
                            " ORDER BY type, name").fetchall()
    finally:
        conn.close()


def rows(path, tables, columns: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Every row of ``tables`` (only ``columns[table]`` where given: a migration that adds a
    column keeps the row's other values); of the controller table, all but the certificates a
    start renews when due (the fixture's certificates age: ``lifecycle/renewal.py``)."""
    conn = apsw.Connection(str(path))
    try:
        def select(t: str) -> str:
            cols = ", ".join(f'"{c}"' for c in columns[t]) if columns else "*"
            return f'SELECT {cols} FROM "{t}"'
        return {t: sorted(repr(r) for r in conn.execute(select(t))
                          if t != "controller" or not r[0].startswith(("root_", "signer_", "server_")))
                for t in tables}
    finally:
        conn.close()


def columns(path, tables) -> dict[str, list[str]]:
    conn = apsw.Connection(str(path))
    try:
        return {t: [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    finally:
        conn.close()


def tables(path) -> list[str]:
    return [name for kind, name, _, _ in schema(path) if kind == "table" and "_search" not in name]


def counts(path) -> dict[str, int]:
    conn = apsw.Connection(str(path))
    try:
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables(path)}
    finally:
        conn.close()


def test_there_is_a_fixture_of_every_earlier_schema_version():
    assert sorted(FIXTURES) == list(range(1, SCHEMA_VERSION))
    assert sorted(SCHEMAS) == list(range(1, SCHEMA_VERSION))


@pytest.mark.parametrize("version", sorted(SCHEMAS))
def test_a_file_of_every_earlier_schema_migrates_to_a_fresh_one(version, tmp_path):
    old = tmp_path / "old.db"
    conn = apsw.Connection(str(old))
    conn.execute(SCHEMAS[version].read_text())
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    Store(str(old)).close()
    fresh = tmp_path / "fresh.db"
    Store(str(fresh)).close()
    assert schema(old) == schema(fresh)
    assert counts(old) == counts(fresh)        # a migration that seeds rows seeds what a fresh file has


@pytest.mark.parametrize("version", sorted(FIXTURES))
def test_an_earlier_version_migrates_to_the_fresh_schema_without_losing_a_row(version, tmp_path):
    db = unpack(version, tmp_path)
    before_tables = tables(db)
    before = rows(db, before_tables)
    before_columns = columns(db, before_tables)
    assert sum(len(v) for v in before.values()) > 50   # a populated network
    before_schema = schema(db)

    app = create_app(Settings(db=str(db), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    ctl = app.state.controller
    assert ctl.store.value("PRAGMA user_version") == SCHEMA_VERSION
    ctl.store.close()

    fresh = tmp_path / "fresh.db"
    Store(str(fresh)).close()
    assert schema(db) == schema(fresh)
    after = rows(db, before_tables, before_columns)
    # every row of every table, as it was; and ziti-lite itself listed in controllers at start
    assert {t: v for t, v in after.items() if t != "controllers"} == {t: v for t, v in before.items()
                                                                      if t != "controllers"}
    assert set(before.get("controllers", [])) <= set(after.get("controllers", [])) and after.get("controllers")
    # the snapshot beside it is the file as it was
    (snap,) = glob.glob(f"{db}.pre-{version}-*")
    assert rows(snap, before_tables) == before and schema(snap) == before_schema
    assert apsw.Connection(snap).execute("PRAGMA user_version").fetchone()[0] == version
    # and it is searchable as a fresh file is: the migration indexed the rows that were there
    app = create_app(Settings(db=str(db), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    store = app.state.controller.store
    assert store.value("SELECT count(*) FROM identities_search") == store.value("SELECT count(*) FROM identities")
    assert not glob.glob(f"{db}.pre-{SCHEMA_VERSION}-*")   # nothing to migrate: no snapshot
    store.close()


def test_a_failing_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    db = unpack(1, tmp_path)
    before = schema(db), rows(db, tables(db))

    def half_then_fail(conn):
        conn.execute("CREATE TABLE half_done (x)")
        conn.execute("DELETE FROM identities")
        raise apsw.ConstraintError("the migration broke")
    monkeypatch.setitem(store_module.MIGRATIONS, 1, half_then_fail)
    with pytest.raises(apsw.ConstraintError):
        Store(str(db))
    assert (schema(db), rows(db, tables(db))) == before
    assert apsw.Connection(str(db)).execute("PRAGMA user_version").fetchone()[0] == 1


def test_only_the_last_few_snapshots_are_kept(tmp_path):
    db = tmp_path / "net.db"
    made = []
    for _ in range(KEEP_SNAPSHOTS + 2):
        unpack(1, tmp_path)
        s = Store(str(db))
        made.append(glob.glob(f"{db}.pre-1-*"))
        s.close()
    left = sorted(glob.glob(f"{db}.pre-*"))
    assert len(left) == KEEP_SNAPSHOTS
    assert set(made[-1]) == set(left)


def test_a_foreign_table_survives_a_migration_and_starts(tmp_path):
    db = unpack(1, tmp_path)
    conn = apsw.Connection(str(db))
    conn.execute("CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER);"
                 "CREATE INDEX _litestream_seq_by_seq ON _litestream_seq(seq);"
                 "INSERT INTO _litestream_seq (seq) VALUES (41), (42)")
    conn.close()
    for _ in range(2):   # the migrating start, then an ordinary one
        app = create_app(Settings(db=str(db), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
        app.state.controller.store.close()
        conn = apsw.Connection(str(db))
        assert conn.execute("SELECT seq FROM _litestream_seq ORDER BY seq").fetchall() == [(41,), (42,)]
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = '_litestream_seq_by_seq'").fetchall()
        conn.close()
    # and the integrity check has nothing to say about it
    r = CliRunner().invoke(cli, ["check", "--db", str(db)])
    assert r.exit_code == 0 and "litestream" not in r.output, r.output


@pytest.mark.parametrize("version", [1, 5])
def test_identities_of_a_migrated_file_hold_no_permissions_and_can_be_given_some(version, tmp_path):
    from starlette.testclient import TestClient

    from tests.conftest import Api

    db = unpack(version, tmp_path)
    app = create_app(Settings(db=str(db), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    try:
        with TestClient(app) as client:
            api = Api(client).login("admin", "fixture-Passw0rd")   # make_schema_fixtures.py's admin
            rows = api.get("/identities?limit=500").json()["data"]
            assert len(rows) > 2 and all(r["permissions"] is None for r in rows)
            plain = next(r for r in rows if not r["isAdmin"] and r["typeId"] != "Router")
            assert api.patch(f"/identities/{plain['id']}", json={"permissions": ["service"]}).status_code == 200
            assert api.get(f"/identities/{plain['id']}").json()["data"]["permissions"] == ["service"]
    finally:
        app.state.controller.store.close()
