"""Substring search through the FTS5 trigram indexes: exactly the plain scan's answers (an oracle
over random names and needles), the indexes kept in step by the schema's triggers, the SQL
still parameterised, and the migration that adds them to a version-1 database."""

from __future__ import annotations

import contextlib
import urllib.parse

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import MGMT
from ziti_lite import zitiql as zq
from ziti_lite.db import filters as fq
from ziti_lite.db import search
from ziti_lite.db.store import SCHEMA_VERSION, Store, schema_sql

# ---------------------------------------------------------------------------- the oracle
PLAIN = {"name": fq.Symbol("string", "t.name")}
INDEXED = {"name": fq.Symbol("string", "t.name", search="things")}

# ASCII both cases, FTS5 syntax, case pairs outside ASCII (ß/ẞ, İ/ı, Σ/σ/ς, the Kelvin sign,
# ǅ), a combining accent, CJK, an emoji, NUL and other control characters
CHARS = list("aAbBzZ09-._ \"'*^():+{}[]\\%") + ["é", "É", "ß", "ẞ", "İ", "ı", "i", "I", "Σ", "σ", "ς", "K", "k",
                                                 "ǅ", "ǆ", "\u0301", "日", "本", "😀", "\x00", "\t", "\n"]
WORDS = ["NEAR", "AND", "OR", "NOT", "near", "and", "NEAR(", "*", "^", "-", "name:", '""', "laptop", "LAPTOP"]
piece = st.one_of(st.sampled_from(CHARS), st.sampled_from(WORDS))
text = st.lists(piece, max_size=8).map("".join)
OPS = [zq.CONTAINS, zq.ICONTAINS, zq.NOT_CONTAINS, zq.NOT_ICONTAINS]


@st.composite
def case(draw):
    names = draw(st.lists(text, min_size=1, max_size=12, unique=True))
    if draw(st.booleans()):
        source = draw(st.sampled_from(names))
        i = draw(st.integers(0, len(source)))
        j = draw(st.integers(i, len(source)))
        needle = draw(st.sampled_from([str, str.upper, str.lower, str.swapcase]))(source[i:j])
    else:
        needle = draw(text)
    return names, needle.replace("\x00", ""), draw(st.sampled_from(OPS))   # ZitiQL strings hold no NUL


@pytest.fixture(scope="module")
def things():
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE things (id TEXT PRIMARY KEY, name TEXT) STRICT;" + search.ddl("things", "name"))
    return conn


@contextlib.contextmanager
def things_indexed():
    search.SEARCH_INDEXES["things"] = "name"
    try:
        yield
    finally:
        del search.SEARCH_INDEXES["things"]


def _ids(conn, symbols, predicate) -> list:
    with things_indexed():
        c = fq.compile_query(zq.Query(predicate), symbols)
    return [r[0] for r in conn.execute(f"SELECT t.id FROM things t WHERE {c.where} ORDER BY t.id", c.params)]


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case())
def test_indexed_answers_equal_the_scan(things, example):
    names, needle, op = example
    with things:
        things.execute("DELETE FROM things")
        things.executemany("INSERT INTO things VALUES (?, ?)", [(f"i{k:02d}", n) for k, n in enumerate(names)])
        things.execute("INSERT INTO things VALUES ('null', NULL)")
        # renames and deletes go through the triggers too
        things.execute("UPDATE things SET name = name || ? WHERE id = 'i00'", (needle[:2],))
        things.execute("DELETE FROM things WHERE id = 'i01'")
    compare = zq.Compare(zq.Ref("name"), op, needle)
    want = _ids(things, PLAIN, compare)
    with things_indexed():
        c = fq.compile_query(zq.Query(compare), INDEXED)
    if c.count is not None:     # the count in the index and the probing plan agree too
        assert things.execute(*c.count).fetchone()[0] == len(want), (names, needle, op)
        probe = search.probe_variant(c.where)
        assert probe != c.where
        assert [r[0] for r in things.execute(f"SELECT t.id FROM things t WHERE {probe} ORDER BY t.id",
                                             c.params)] == want
    for predicate in (compare, zq.Not(compare), zq.Or(compare, zq.Compare(zq.Ref("name"), zq.EQ, "x")),
                      zq.And(compare, zq.Not(zq.Compare(zq.Ref("name"), zq.ICONTAINS, needle[::-1])))):
        assert _ids(things, INDEXED, predicate) == _ids(things, PLAIN, predicate), (names, needle, op)


def test_index_used_only_for_positive_needles_of_three_characters():
    def sql(op, needle):
        with things_indexed():
            return fq.compile_query(zq.Query(zq.Compare(zq.Ref("name"), op, needle)), INDEXED)

    for op in (zq.CONTAINS, zq.ICONTAINS):
        c = sql(op, 'a"* NEAR(b)')
        assert "FROM things_search WHERE" in c.where and c.count is not None
        assert c.params == ['a"* NEAR(b)'] * 2           # bound, never in the SQL text
        assert "NEAR" not in c.where
        assert "MATCH" not in sql(op, "ab").where      # too short for a trigram: plain scan
    for op in (zq.NOT_CONTAINS, zq.NOT_ICONTAINS):
        assert "MATCH" not in sql(op, "abcdef").where


def test_schema_sql_holds_the_search_ddl_verbatim():
    from ziti_lite.db.store import schema_section
    assert schema_section("search-indexes") == search.all_ddl()


# ---------------------------------------------------------------------------- through the API
def _filter(text: str) -> str:
    quoted = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return urllib.parse.quote(f'name contains "{quoted}"')


def _names(admin, collection, filter_text):
    r = admin.client.get(f"{MGMT}/{collection}?limit=500&filter={filter_text}", headers={"zt-session": admin.token})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"]["pagination"]["totalCount"] == len(body["data"])
    return sorted(d["name"] for d in body["data"])


def test_search_through_the_api(admin):
    names = ["maria.garcia-laptop-00042", "MARIA.GARCIA-phone-7", 'quote"star*caret^-near NEAR AND',
             "Zoë Müller – desk ☃", "jose.silva-server-00042"]
    ids = {n: admin.create("identities", {"name": n, "type": "User", "isAdmin": False}) for n in names}
    assert _names(admin, "identities", _filter("garcia")) == ["maria.garcia-laptop-00042"]
    assert _names(admin, "identities", urllib.parse.quote('name icontains "garcia"')) == \
        ["MARIA.GARCIA-phone-7", "maria.garcia-laptop-00042"]
    assert _names(admin, "identities", _filter("-00042")) == ["jose.silva-server-00042", "maria.garcia-laptop-00042"]
    assert _names(admin, "identities", _filter('"star*caret^-near NEAR')) == ['quote"star*caret^-near NEAR AND']
    assert _names(admin, "identities", _filter("NEAR AND")) == ['quote"star*caret^-near NEAR AND']
    assert _names(admin, "identities", _filter("ë Mü")) == ["Zoë Müller – desk ☃"]
    assert _names(admin, "identities", _filter("ËM")) == []
    assert _names(admin, "identities", _filter("k ☃")) == ["Zoë Müller – desk ☃"]
    assert _names(admin, "identities", _filter("gA")) == []           # short needles: plain scan
    # renames and deletes keep the index in step
    r = admin.client.patch(f"{MGMT}/identities/{ids['jose.silva-server-00042']}", json={"name": "jose.silva-nas-1"},
                           headers={"zt-session": admin.token})
    assert r.status_code == 200, r.text
    assert _names(admin, "identities", _filter("-00042")) == ["maria.garcia-laptop-00042"]
    assert _names(admin, "identities", _filter("silva-nas")) == ["jose.silva-nas-1"]
    gone = ids["maria.garcia-laptop-00042"]
    r = admin.client.delete(f"{MGMT}/identities/{gone}", headers={"zt-session": admin.token})
    assert r.status_code == 200, r.text
    assert _names(admin, "identities", _filter("garcia-lap")) == []
    # other collections with a search index
    admin.create("services", {"name": "payroll-db-eu", "encryptionRequired": True})
    assert _names(admin, "services", _filter("roll-db")) == ["payroll-db-eu"]


# ---------------------------------------------------------------------------- the migration
def _downgrade_to_v1(path) -> None:
    """What a version-1 file is: today's schema without the search indexes, user_version 1."""
    conn = apsw.Connection(str(path))
    with conn:
        for table in search.SEARCH_INDEXES:
            fts = search.index_name(table)
            for suffix in ("ai", "ad", "au"):
                conn.execute(f"DROP TRIGGER {fts}_{suffix}")
            conn.execute(f"DROP TABLE {fts}")
            conn.execute(f"DROP VIEW {fts}_source")
        conn.execute("PRAGMA user_version = 1")
    conn.close()


def test_v1_schema_is_v2_without_the_search_ddl(tmp_path):
    v1 = schema_sql().replace(search.all_ddl(), "")
    assert v1 != schema_sql()
    a, b = apsw.Connection(str(tmp_path / "a.db")), Store(str(tmp_path / "b.db"))
    a.execute(v1)
    a.execute("PRAGMA user_version = 1")
    a.close()
    b.close()
    _downgrade_to_v1(tmp_path / "b.db")
    dump = [
        apsw.Connection(str(tmp_path / f))
        .execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .fetchall()
        for f in ("a.db", "b.db")
    ]
    assert dump[0] == dump[1]


def test_migration_from_version_1_indexes_existing_rows(app, admin, db_path):
    from starlette.testclient import TestClient

    from tests.conftest import ADMIN_PASSWORD, ADMIN_USER, Api
    from ziti_lite.app import create_app
    from ziti_lite.config import Settings

    admin.create("identities", {"name": "before-migration-laptop", "type": "User", "isAdmin": False})
    admin.create("services", {"name": "before-migration-svc", "encryptionRequired": True})
    app.state.controller.store.close()
    _downgrade_to_v1(db_path)
    assert apsw.Connection(str(db_path)).execute("PRAGMA user_version").fetchone()[0] == 1

    migrated = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    try:
        store = migrated.state.controller.store
        assert store.value("PRAGMA user_version") == SCHEMA_VERSION == 7
        assert (
            store.value("SELECT count(*) FROM identities_search WHERE name MATCH ?", (search.phrase("migration-lap"),))
            == 1
        )
        with TestClient(migrated) as client:
            api = Api(client).login()
            assert _names(api, "identities", _filter("migration-lap")) == ["before-migration-laptop"]
            assert _names(api, "services", _filter("migration-svc")) == ["before-migration-svc"]
            api.create("identities", {"name": "after-migration-laptop", "type": "User", "isAdmin": False})
            assert _names(api, "identities", _filter("migration-lap")) == [
                "after-migration-laptop",
                "before-migration-laptop",
            ]
        assert not [p for p in store.conn.execute("PRAGMA integrity_check") if p[0] != "ok"]
    finally:
        migrated.state.controller.store.close()
    assert Store(str(db_path)).migrate() is False


def test_check_finds_and_rebuilds_a_stale_index(ctl, admin):
    from ziti_lite import integrity

    admin.create("identities", {"name": "stale-entry-laptop", "type": "User", "isAdmin": False})
    store = ctl.store
    assert not [p for p in integrity.run(store) if "search index" in p.description]
    with store.write():  # drop one row from the index behind the triggers' back
        store.execute(
            "INSERT INTO identities_search(identities_search, rowid, name)"
            " SELECT 'delete', rowid, name FROM identities WHERE name = 'stale-entry-laptop'"
        )
    assert _names(admin, "identities", _filter("entry-lap")) == []
    found = [p for p in integrity.run(store, fix=True) if "search index" in p.description]
    assert [p.description for p in found] == [
        "search index identities_search differs from the rows of identities (1 rows missing, 0 stray)"
    ]
    assert found[0].fixed
    assert not [p for p in integrity.run(store) if "search index" in p.description]
    assert _names(admin, "identities", _filter("entry-lap")) == ["stale-entry-laptop"]


def test_many_matches_page_by_probing_the_index(admin, monkeypatch):
    """Above SEARCH_PROBE_ABOVE matches a page walks the sort order: same pages, same totals."""
    from ziti_lite.api import crud

    for n in range(12):
        admin.create("identities", {"name": f"probe-{n:02d}-{'x' if n % 3 else 'y'}", "type": "User", "isAdmin": False})

    def pages():
        out = []
        for f in ('name contains "probe-"', 'name icontains "PROBE-"', 'name contains "-x"', 'name icontains "e-0"'):
            for offset in (0, 5):
                r = admin.client.get(
                    f"{MGMT}/identities?limit=5&offset={offset}&filter={urllib.parse.quote(f)}",
                    headers={"zt-session": admin.token},
                )
                assert r.status_code == 200, r.text
                body = r.json()
                out.append(([d["name"] for d in body["data"]], body["meta"]["pagination"]["totalCount"]))
        return out

    driven = pages()
    monkeypatch.setattr(crud, "SEARCH_PROBE_ABOVE", 0)
    assert pages() == driven
    assert driven[0][1] == 12 and driven[4][1] == 8
