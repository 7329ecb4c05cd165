"""Data integrity: SQLite's own checks plus ziti-lite's invariants, shared by the Database API
group and ``ziti-lite check``. Each check yields problems; a fixable problem carries its fix."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .db import search


@dataclass
class Problem:
    description: str
    fixable: bool = False
    fix: Callable[[object], None] | None = None
    fixed: bool = False


Check = Callable[[object], Iterator[Problem]]
CHECKS: list[Check] = []


def check(fn: Check) -> Check:
    CHECKS.append(fn)
    return fn


@check
def sqlite_integrity(store) -> Iterator[Problem]:
    for (msg,) in store.conn.execute("PRAGMA integrity_check"):
        if msg != "ok":
            yield Problem(f"sqlite integrity_check: {msg}")


def foreign_keys(store) -> Iterator[Problem]:
    """SQLite's foreign_key_check (rows whose reference is dangling, e.g. written with foreign
    keys off). The fix nulls a nullable reference and deletes the row otherwise; it re-checks
    at fix time, so a problem an earlier, more specific fix already repaired is left alone.
    Runs after every other check (see ``run``)."""
    seen = set()
    for table, rowid, parent, fkid in store.conn.execute("PRAGMA foreign_key_check").fetchall():
        fk = [r for r in store.conn.execute(f"PRAGMA foreign_key_list({table})").fetchall() if r[0] == fkid]
        cols = [r[3] for r in fk]
        pcols = [r[4] or "id" for r in fk]
        dangling = (" AND ".join(f"t.{c} IS NOT NULL" for c in cols) + " AND NOT EXISTS (SELECT 1 FROM "
                    f"{parent} p WHERE " + " AND ".join(f"p.{pc} = t.{c}" for c, pc in zip(cols, pcols)) + ")")
        if rowid is not None:
            where, params = f"t.rowid = ? AND {dangling}", [rowid]
            what = f"{table} row {rowid}"
        else:  # WITHOUT ROWID table: one problem per dangling value
            values = store.conn.execute(f"SELECT {', '.join('t.' + c for c in cols)} FROM {table} t WHERE {dangling}"
                                        ).fetchall()
            for v in values:
                if (table, fkid, v) in seen:
                    continue
                seen.add((table, fkid, v))
                where = " AND ".join(f"t.{c} = ?" for c in cols) + f" AND {dangling}"
                yield Problem(f"{table} rows with {', '.join(cols)} = {', '.join(map(str, v))} reference a missing "
                              f"{parent}", True, _fk_fix(table, cols, where, list(v)))
            continue
        yield Problem(f"{what} ({', '.join(cols)}) references a missing {parent}", True,
                      _fk_fix(table, cols, where, params))


def _fk_fix(table: str, cols: list[str], where: str, params: list):
    def fix(s):
        info = {r[1]: r for r in s.conn.execute(f"PRAGMA table_info({table})").fetchall()}
        if all(not info[c][3] and not info[c][5] for c in cols):  # nullable, not part of the key
            s.execute(f"UPDATE {table} AS t SET {', '.join(f'{c} = NULL' for c in cols)} WHERE {where}", params)
        else:
            s.execute(f"DELETE FROM {table} AS t WHERE {where}", params)
    return fix


@check
def service_config_links(store) -> Iterator[Problem]:
    """services.configs (the ordered list) and the service_configs index must agree."""
    for sid, configs in store.conn.execute("SELECT id, configs FROM services").fetchall():
        listed = json.loads(configs)
        want = set(listed)
        have = set(store.column("SELECT config_id FROM service_configs WHERE service_id = ?", (sid,)))
        live = [c for c in listed if store.value("SELECT 1 FROM configs WHERE id = ?", (c,))]
        if want != have or live != listed:
            def fix(s, sid=sid, want=want, configs=configs):
                s.execute("DELETE FROM service_configs WHERE service_id = ?", (sid,))
                live = [c for c in json.loads(configs) if s.value("SELECT 1 FROM configs WHERE id = ?", (c,))]
                s.executemany("INSERT INTO service_configs VALUES (?, ?)", [(sid, c) for c in live])
                s.execute("UPDATE services SET configs = ? WHERE id = ?", (json.dumps(live), sid))
            yield Problem(f"service {sid} config links differ from its configs list", True, fix)


@check
def identity_auth_policy(store) -> Iterator[Problem]:
    for (iid,) in store.conn.execute(
            "SELECT id FROM identities WHERE auth_policy_id NOT IN (SELECT id FROM auth_policies)").fetchall():
        def fix(s, iid=iid):
            s.execute("UPDATE identities SET auth_policy_id = 'default' WHERE id = ?", (iid,))
        yield Problem(f"identity {iid} references a missing auth policy", True, fix)


@check
def search_indexes(store) -> Iterator[Problem]:
    """Each FTS5 search index (``db/search.py``) holds exactly its table's rows (compared by rowid
    through the index's docsize table, read-only: no write lock while a server runs); the fix
    rebuilds it from the rows."""
    for table in search.SEARCH_INDEXES:
        fts = search.index_name(table)
        stray = store.value(f"SELECT count(*) FROM {fts}_docsize d WHERE NOT EXISTS"
                            f" (SELECT 1 FROM {table} t WHERE t.rowid = d.id)")
        missing = store.value(f"SELECT count(*) FROM {table} t WHERE NOT EXISTS"
                              f" (SELECT 1 FROM {fts}_docsize d WHERE d.id = t.rowid)")
        if stray or missing:
            def fix(s, table=table):
                search.rebuild(s.conn, table)
            yield Problem(f"search index {fts} differs from the rows of {table}"
                          f" ({missing} rows missing, {stray} stray)", True, fix)


# modules whose checks register themselves on import; loaded by run(), so that ``ziti-lite
# check`` in a fresh process runs the same checks as a serving controller
def run(store, fix: bool = False) -> list[Problem]:
    """Every registered check (``CHECKS``: the modules of ``wiring.MODULES`` register theirs, so
    load the wiring first, as the controller and ``ziti-lite check`` do), then foreign keys."""
    problems: list[Problem] = []
    for c in (*CHECKS, foreign_keys):
        problems.extend(c(store))
    fixes = [(p, p.fix) for p in problems if p.fixable and p.fix is not None]
    if fix and fixes:  # no write transaction (no wait for busy writers) when there is nothing to fix
        with store.write():
            for p, repair in fixes:
                repair(store)
                p.fixed = True
    return problems
