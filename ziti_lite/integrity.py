"""Data integrity: SQLite's own checks plus ziti-lite's invariants, shared by the Database API
group and ``ziti-lite check``. Each check yields problems; a fixable problem carries its fix."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterator, Optional


@dataclass
class Problem:
    description: str
    fixable: bool = False
    fix: Optional[Callable[[object], None]] = None
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


@check
def foreign_keys(store) -> Iterator[Problem]:
    for table, rowid, parent, _ in store.conn.execute("PRAGMA foreign_key_check"):
        def fix(s, table=table, rowid=rowid):
            s.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
        yield Problem(f"{table} row {rowid} references a missing {parent}", True, fix)


@check
def service_config_links(store) -> Iterator[Problem]:
    """services.configs (the ordered list) and the service_configs index must agree."""
    for sid, configs in store.conn.execute("SELECT id, configs FROM services").fetchall():
        want = set(json.loads(configs))
        have = set(store.column("SELECT config_id FROM service_configs WHERE service_id = ?", (sid,)))
        if want != have:
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


def run(store, fix: bool = False) -> list[Problem]:
    problems: list[Problem] = []
    for c in CHECKS:
        problems.extend(c(store))
    if fix:
        with store.write():
            for p in problems:
                if p.fixable and p.fix is not None:
                    p.fix(store)
                    p.fixed = True
    return problems
