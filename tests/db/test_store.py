"""The Store seam: schema on a new file, pragmas, transactions and savepoints, snapshots."""

from __future__ import annotations

import apsw
import pytest

from ziti_lite import clock
from ziti_lite.db.search import SEARCH_INDEXES
from ziti_lite.db.store import SCHEMA_VERSION, DatabaseRefused, Store


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "s.db"))
    yield s
    s.close()


def test_new_file_gets_schema_and_version(store):
    assert store.value("PRAGMA user_version") == SCHEMA_VERSION
    tables = set(store.column("SELECT name FROM sqlite_master WHERE type = 'table'"))
    assert {
        "controller",
        "identities",
        "authenticators",
        "api_sessions",
        "services",
        "configs",
        "config_types",
    } <= tables
    assert store.migrate() is False  # idempotent


def test_tables_are_strict(store):
    rows = store.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = {name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")}
    assert virtual == {f"{t}_search" for t in SEARCH_INDEXES}
    for name, sql in rows:
        if name in virtual or any(name.startswith(v + "_") for v in virtual):  # FTS5 and its shadow tables
            continue
        assert "STRICT" in sql.upper(), name


def test_pragmas(store):
    assert store.value("PRAGMA journal_mode") == "wal"
    assert store.value("PRAGMA foreign_keys") == 1
    with pytest.raises(apsw.ConstraintError):
        store.execute(
            "INSERT INTO configs (id, created_at, updated_at, name, config_type_id) VALUES ('c','t','t','n','missing')"
        )


def test_reads_on_empty_results(store):
    assert store.one("SELECT * FROM identities WHERE id = ?", ("x",)) is None
    assert store.all("SELECT * FROM identities") == []
    assert store.value("SELECT id FROM identities") is None
    assert store.column("SELECT id FROM identities") == []


def _add(store, id):
    store.execute("INSERT INTO identity_types (id, created_at, updated_at, name) VALUES (?, 't', 't', ?)", (id, id))


def test_write_commits_and_rolls_back(store):
    with store.write():
        _add(store, "a")
    with pytest.raises(RuntimeError):
        with store.write():
            _add(store, "b")
            raise RuntimeError("boom")
    assert store.column("SELECT id FROM identity_types ORDER BY id") == ["a"]
    assert store.conn.in_transaction is False


def test_nested_write_is_a_savepoint(store):
    with store.write():
        _add(store, "outer")
        with pytest.raises(ValueError):
            with store.write():
                _add(store, "inner")
                raise ValueError
        _add(store, "after")
    assert store.column("SELECT id FROM identity_types ORDER BY id") == ["after", "outer"]


def test_one_returns_a_dict(store):
    with store.write():
        _add(store, "x")
    row = store.one("SELECT id, name FROM identity_types WHERE id = ?", ("x",))
    assert row == {"id": "x", "name": "x"}
    assert store.all("SELECT id FROM identity_types") == [{"id": "x"}]


def test_executemany(store):
    with store.write():
        store.executemany(
            "INSERT INTO identity_types (id, created_at, updated_at, name) VALUES (?, 't', 't', ?)",
            [("a", "a"), ("b", "b")],
        )
    assert store.value("SELECT count(*) FROM identity_types") == 2


def test_snapshot_is_consistent_while_another_connection_writes(store, tmp_path):
    with store.write():
        for i in range(50):
            _add(store, f"id{i}")
    other = apsw.Connection(store.path)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO identity_types (id, created_at, updated_at, name) VALUES ('uncommitted','t','t','u')")
    out = str(tmp_path / "snap.db")
    store.snapshot(out)
    other.execute("ROLLBACK")
    other.close()
    copy = Store(out)
    assert copy.value("SELECT count(*) FROM identity_types") == 50
    assert copy.value("PRAGMA integrity_check") == "ok"
    copy.close()


def test_newer_schema_is_refused(tmp_path):
    path = str(tmp_path / "future.db")
    conn = apsw.Connection(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(DatabaseRefused, match="newer"):
        Store(path)


def test_sql_now_follows_the_controller_clock(store):
    clock.reset()
    try:
        before = store.value("SELECT zl_now()")
        clock.advance(3600)
        later = store.value("SELECT zl_now()")
        assert later > before and clock.parse(later) - clock.parse(before) >= __import__("datetime").timedelta(
            minutes=59
        )
    finally:
        clock.reset()


def _add_type(conn: apsw.Connection, name: str) -> None:
    now = clock.stamp()
    conn.execute("INSERT INTO identity_types (id, created_at, updated_at, name) VALUES (?, ?, ?, ?)",
                  (name, now, now, name))


def test_a_count_is_remembered_only_while_nothing_changed(store):
    sql = "SELECT count(*) FROM identity_types"
    before = store.count(sql)
    assert store.count(sql) == before
    with store.write():                       # a write of this connection
        _add_type(store.conn, "counted-1")
    assert store.count(sql) == before + 1
    other = apsw.Connection(store.path)       # a commit of another connection (another process)
    _add_type(other, "counted-2")
    other.close()
    assert store.count(sql) == before + 2
    try:                                      # a write rolled back: counted again, the same
        with store.write():
            _add_type(store.conn, "counted-3")
            assert store.count(sql) == before + 3
            raise RuntimeError
    except RuntimeError:
        pass
    assert store.count(sql) == before + 2
    assert store.count("SELECT count(*) FROM identity_types WHERE name = ?", ["counted-1"]) == 1


def _rows_in_statistics(store: Store, table: str) -> int | None:
    if not store.value("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'"):
        return None
    stat = store.value("SELECT stat FROM sqlite_stat1 WHERE tbl = ? ORDER BY stat DESC LIMIT 1", (table,))
    return None if stat is None else int(stat.split()[0])


def _config_types(store: Store, n: int, start: int = 0) -> None:
    now = clock.stamp()
    with store.write():
        store.executemany("INSERT INTO config_types (id, created_at, updated_at, name) VALUES (?, ?, ?, ?)",
                          [(f"ct-{i}", now, now, f"type-{i}") for i in range(start, start + n)])


def test_statistics_of_small_tables_are_refreshed_once_the_tables_grew(tmp_path):
    path = str(tmp_path / "grow.db")
    Store(path).close()
    first = Store(path)
    _config_types(first, 5)
    first.conn.execute("PRAGMA optimize(0x10002)")   # what a connection opening now would record
    small = _rows_in_statistics(first, "config_types")
    assert small is not None and small < 20
    _config_types(first, 5000, start=5)
    first.refresh_statistics()
    assert _rows_in_statistics(first, "config_types") > 1000
    first.close()


def test_a_second_connection_records_no_statistics_as_it_opens(tmp_path):
    path = str(tmp_path / "second.db")
    main = Store(path, statistics=False)
    _config_types(main, 50)
    second = Store(path, statistics=False)
    assert _rows_in_statistics(second, "config_types") is None
    with_statistics = Store(path)
    assert _rows_in_statistics(with_statistics, "config_types") is not None
    for s in (second, with_statistics, main):
        s.close()
