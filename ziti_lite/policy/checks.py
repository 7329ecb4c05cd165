"""Integrity checks of the policy engine's derived tables, registered with ``ziti_lite.integrity``.

Each check recomputes its table's expected content straight from the entities and policies
(the membership check evaluates every role list in memory, not through the SQL index it
verifies) and reports the differences; the fixes re-derive the rows. Checks run in order, so
the attribute index is repaired before memberships are re-evaluated through it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator

from ..integrity import Problem, check
from . import evaluate, links
from .model import KINDS, SIDES, Kind, Link, Side


def _pairs(store, sql: str, params=()) -> set[tuple]:
    return set(store.conn.execute(sql, params).fetchall())


@check
def role_attribute_index(store) -> Iterator[Problem]:
    for side in SIDES.values():
        want = _pairs(
            store, f"SELECT j.value, t.id FROM {side.table} t, json_each(t.role_attributes) j WHERE {side.where('t')}"
        )
        have = _pairs(store, "SELECT attribute, entity_id FROM entity_role_attributes WHERE kind = ?", (side.name,))
        if want != have:

            def fix(s, side=side):
                s.execute("DELETE FROM entity_role_attributes WHERE kind = ?", (side.name,))
                s.execute(
                    "INSERT OR IGNORE INTO entity_role_attributes (kind, attribute, entity_id)"
                    f" SELECT ?, j.value, t.id FROM {side.table} t, json_each(t.role_attributes) j"
                    f" WHERE {side.where('t')}",
                    (side.name,),
                )

            yield Problem(
                f"role attribute index of {side.entity_type}: {len(want - have)} missing and "
                f"{len(have - want)} stale entries",
                True,
                fix,
            )


@check
def policy_role_index(store) -> Iterator[Problem]:
    for kind in KINDS.values():
        want: set[tuple] = set()
        for ln in kind.links:
            want |= _pairs(
                store, f"SELECT ?, j.value, p.id FROM {kind.table} p, json_each(p.{ln.roles}) j", (ln.side.name,)
            )
        have = _pairs(store, "SELECT side, role, policy_id FROM policy_roles WHERE kind = ?", (kind.name,))
        if want != have:

            def fix(s, kind=kind):
                s.execute("DELETE FROM policy_roles WHERE kind = ?", (kind.name,))
                for row in s.all(f"SELECT * FROM {kind.table}"):
                    links.index_policy_roles(s, kind, row)

            yield Problem(
                f"role index of {kind.resource}: {len(want - have)} missing and {len(have - want)} stale entries",
                True,
                fix,
            )


def _attribute_sets(store, side: Side) -> tuple[set[str], dict[str, set[str]]]:
    ids: set[str] = set()
    by_attr: dict[str, set[str]] = defaultdict(set)
    for id, attrs in store.conn.execute(f"SELECT t.id, t.role_attributes FROM {side.table} t WHERE {side.where('t')}"):
        ids.add(id)
        for a in json.loads(attrs or "[]"):
            by_attr[a].add(id)
    return ids, by_attr


def _selected(roles: list[str], semantic: str, ids: set[str], by_attr: dict[str, set[str]]) -> set[str]:
    want, named = evaluate.split(roles)
    if "all" in want:
        return set(ids)
    out = {i for i in named if i in ids}
    if want:
        sets = [by_attr.get(a, set()) for a in set(want)]
        if evaluate.canonical_semantic(semantic) == evaluate.ANY_OF:
            out |= set().union(*sets)
        else:
            out |= set.intersection(*sets)
    return out


@check
def policy_membership(store) -> Iterator[Problem]:
    universe = {name: _attribute_sets(store, side) for name, side in SIDES.items()}
    for kind in KINDS.values():
        for ln in kind.links:
            ids, by_attr = universe[ln.side.name]
            have: dict[str, set[tuple]] = defaultdict(set)
            cols = f"{ln.column}, type" if ln.typed else f"{ln.column}, NULL"
            for pid, eid, typ in store.conn.execute(f"SELECT policy_id, {cols} FROM {ln.table}"):
                have[pid].add((eid, typ))
            for row in store.all(f"SELECT * FROM {kind.table}"):
                typ = row["type"] if ln.typed else None
                want = {(e, typ) for e in _selected(json.loads(row[ln.roles]), row["semantic"], ids, by_attr)}
                got = have.pop(row["id"], set())
                if want != got:
                    yield _membership_problem(kind, ln, row["id"], len(want - got), len(got - want))
            for pid, got in have.items():  # rows of policies that no longer exist
                yield _membership_problem(kind, ln, pid, 0, len(got))


def _membership_problem(kind: Kind, ln: Link, pid: str, missing: int, extra: int) -> Problem:
    def fix(s):
        s.execute(f"DELETE FROM {ln.table} WHERE policy_id = ?", (pid,))
        row = s.one(f"SELECT * FROM {kind.table} WHERE id = ?", (pid,))
        if row is not None:
            links.evaluate_policy(s, kind, ln, row, fresh=True)

    return Problem(
        f"{kind.resource} {pid}: {ln.wire} selects {missing} {ln.side.entity_type} that are not linked "
        f"and {extra} linked ones it does not select",
        True,
        fix,
    )
