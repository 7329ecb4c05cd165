"""Materialised policy membership, kept in step inside the transaction of every write that
changes it.

Three derived tables are maintained here:

* ``entity_role_attributes`` — (side, attribute, entity) for every role attribute of every
  identity, service, edge router and posture check;
* ``policy_roles`` — (kind, side, role, policy) for every role entry of every policy;
* the membership tables named in ``model.KINDS`` — which entities each policy selects.

A policy write re-evaluates the changed role lists against every entity, in SQL over the
attribute index (``evaluate.member_sql``). An entity write re-evaluates only the policies that
could select it — those naming ``#all``, ``@<its id>`` or one of its attributes, found through
``policy_roles`` — with ``evaluate.matches``. Entity deletes drop the entity's rows and remove
``@<id>`` from every policy's role lists. ``rebuild`` recomputes everything from scratch.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .. import clock
from . import evaluate
from .model import KINDS, SIDES, SP, Kind, Link, Side

if TYPE_CHECKING:
    from ..api.context import Ctx


def _roles(text: str | None) -> list[str]:
    return json.loads(text) if text else []


# ------------------------------------------------------------------ entity side
def index_attributes(store, side: Side, entity_id: str, attrs: list[str]) -> None:
    store.execute("DELETE FROM entity_role_attributes WHERE entity_id = ? AND kind = ?", (entity_id, side.name))
    if attrs:
        store.executemany("INSERT OR IGNORE INTO entity_role_attributes (kind, attribute, entity_id) VALUES (?, ?, ?)",
                          [(side.name, a, entity_id) for a in set(attrs)])


def current_attributes(store, side: Side, entity_id: str) -> list[str] | None:
    """The entity's role attributes, or None when no such entity (of this side) exists."""
    row = store.one(
        f"SELECT t.role_attributes AS ra FROM {side.table} t WHERE t.id = ? AND {side.where('t')}", (entity_id,)
    )
    return None if row is None else _roles(row["ra"])


def entity_written(store, side: Side, entity_id: str, before: dict | None) -> None:
    """After an entity create or update: re-index its attributes and its policy memberships."""
    attrs = current_attributes(store, side, entity_id)
    if attrs is None:
        entity_deleted(store, side, entity_id)
        return
    if before is not None and set(_roles(before.get("role_attributes"))) == set(attrs):
        return
    index_attributes(store, side, entity_id, attrs)
    for kind in KINDS.values():
        ln = kind.link(side.name)
        if ln is not None:
            evaluate_entity(store, kind, ln, entity_id, attrs)


def evaluate_entity(store, kind: Kind, ln: Link, entity_id: str, attrs: list[str]) -> None:
    probe = json.dumps(["#all", "@" + entity_id, *("#" + a for a in set(attrs))])
    type_col = "p.type" if kind is SP else "NULL"
    rows = store.all(
        f"SELECT DISTINCT p.id AS id, p.semantic AS semantic, p.{ln.roles} AS roles, {type_col} AS type"
        f" FROM policy_roles pr JOIN {kind.table} p ON p.id = pr.policy_id"
        " WHERE pr.kind = ? AND pr.side = ? AND pr.role IN (SELECT value FROM json_each(?))",
        (kind.name, ln.side.name, probe),
    )
    want = {r["id"]: r["type"] for r in rows if evaluate.matches(entity_id, attrs, _roles(r["roles"]), r["semantic"])}
    have = dict(
        store.conn.execute(
            f"SELECT policy_id, {'type' if ln.typed else 'NULL'} FROM {ln.table} WHERE {ln.column} = ?", (entity_id,)
        ).fetchall()
    )
    drop = [(p, entity_id) for p in have if p not in want or (ln.typed and have[p] != want[p])]
    add = [p for p in want if p not in have or (ln.typed and have[p] != want[p])]
    if drop:
        store.executemany(f"DELETE FROM {ln.table} WHERE policy_id = ? AND {ln.column} = ?", drop)
    if add:
        if ln.typed:
            store.executemany(
                f"INSERT INTO {ln.table} (policy_id, {ln.column}, type) VALUES (?, ?, ?)",
                [(p, entity_id, want[p]) for p in add],
            )
        else:
            store.executemany(
                f"INSERT INTO {ln.table} (policy_id, {ln.column}) VALUES (?, ?)", [(p, entity_id) for p in add]
            )


def entity_deleted(store, side: Side, entity_id: str) -> None:
    """Drop a deleted entity's attribute and membership rows and its ``@id`` from every policy."""
    store.execute("DELETE FROM entity_role_attributes WHERE entity_id = ? AND kind = ?", (entity_id, side.name))
    ref = "@" + entity_id
    for kind in KINDS.values():
        ln = kind.link(side.name)
        if ln is None:
            continue
        store.execute(f"DELETE FROM {ln.table} WHERE {ln.column} = ?", (entity_id,))
        for pid in store.column(
            "SELECT policy_id FROM policy_roles WHERE kind = ? AND side = ? AND role = ?", (kind.name, side.name, ref)
        ):
            roles = [
                r for r in _roles(store.value(f"SELECT {ln.roles} FROM {kind.table} WHERE id = ?", (pid,))) if r != ref
            ]
            store.execute(
                f"UPDATE {kind.table} SET {ln.roles} = ?, updated_at = ? WHERE id = ?",
                (json.dumps(roles, separators=(",", ":")), clock.stamp(), pid),
            )
            store.execute(
                "DELETE FROM policy_roles WHERE kind = ? AND side = ? AND role = ? AND policy_id = ?",
                (kind.name, side.name, ref, pid),
            )


# ------------------------------------------------------------------ policy side
def index_policy_roles(store, kind: Kind, row: dict) -> None:
    store.execute("DELETE FROM policy_roles WHERE policy_id = ? AND kind = ?", (row["id"], kind.name))
    entries = [(kind.name, ln.side.name, r, row["id"]) for ln in kind.links for r in _roles(row[ln.roles])]
    if entries:
        store.executemany(
            "INSERT OR IGNORE INTO policy_roles (kind, side, role, policy_id) VALUES (?, ?, ?, ?)", entries
        )


def policy_member_sql(store, ln: Link, row: dict) -> tuple[str, list]:
    return evaluate.member_sql(ln.side, _roles(row[ln.roles]), row["semantic"])


def evaluate_policy(store, kind: Kind, ln: Link, row: dict, fresh: bool = False) -> None:
    """Make the membership of one role list of one policy equal to what its roles select.

    ``fresh``: the policy has no membership rows yet (just created), so insert in one pass.
    Otherwise the selection is computed once and only the difference is written.
    """
    sql, params = policy_member_sql(store, ln, row)
    pid = row["id"]
    cols = f"policy_id, {ln.column}, type" if ln.typed else f"policy_id, {ln.column}"
    extra = [row["type"]] if ln.typed else []
    if fresh:
        select = "?, id, ?" if ln.typed else "?, id"
        store.execute(f"INSERT OR IGNORE INTO {ln.table} ({cols}) SELECT {select} FROM ({sql})", [pid, *extra, *params])
        return
    want = set(store.column(sql, params))
    have = set(store.column(f"SELECT {ln.column} FROM {ln.table} WHERE policy_id = ?", (pid,)))
    drop, add = sorted(have - want), sorted(want - have)
    if drop:
        store.executemany(f"DELETE FROM {ln.table} WHERE policy_id = ? AND {ln.column} = ?", [(pid, e) for e in drop])
    if add:
        marks = ", ".join("?" * (3 if ln.typed else 2))
        store.executemany(f"INSERT INTO {ln.table} ({cols}) VALUES ({marks})", [(pid, e, *extra) for e in add])


def policy_written(store, kind: Kind, policy_id: str, before: dict | None) -> None:
    """After a policy create, update or delete: re-index its roles and re-evaluate what changed."""
    row = store.one(f"SELECT * FROM {kind.table} WHERE id = ?", (policy_id,))
    if row is None:
        store.execute("DELETE FROM policy_roles WHERE policy_id = ? AND kind = ?", (policy_id, kind.name))
        for ln in kind.links:
            store.execute(f"DELETE FROM {ln.table} WHERE policy_id = ?", (policy_id,))
        return
    index_policy_roles(store, kind, row)
    for ln in kind.links:
        if ln.typed and before is not None and before["type"] != row["type"]:
            store.execute(f"UPDATE {ln.table} SET type = ? WHERE policy_id = ?", (row["type"], policy_id))
        if before is None:
            evaluate_policy(store, kind, ln, row, fresh=True)
        elif before[ln.roles] != row[ln.roles] or before["semantic"] != row["semantic"]:
            evaluate_policy(store, kind, ln, row)


# ------------------------------------------------------------------ everything
def rebuild(store) -> None:
    """Recompute every derived table from the entities and policies (bulk loads, repairs)."""
    cache = store.value("PRAGMA cache_size")
    store.execute("PRAGMA cache_size = -262144")  # the reverse indexes are written in random order
    try:
        _rebuild(store)
    finally:
        store.execute(f"PRAGMA cache_size = {int(cache)}")


def _rebuild(store) -> None:
    store.execute("DELETE FROM entity_role_attributes")
    for side in SIDES.values():
        store.execute(
            "INSERT OR IGNORE INTO entity_role_attributes (kind, attribute, entity_id)"
            f" SELECT ?, j.value, t.id FROM {side.table} t, json_each(t.role_attributes) j WHERE {side.where('t')}",
            (side.name,),
        )
    store.execute("DELETE FROM policy_roles")
    for kind in KINDS.values():
        for ln in kind.links:
            store.execute(f"DELETE FROM {ln.table}")
            store.execute(
                "INSERT OR IGNORE INTO policy_roles (kind, side, role, policy_id)"
                f" SELECT ?, ?, j.value, p.id FROM {kind.table} p, json_each(p.{ln.roles}) j",
                (kind.name, ln.side.name),
            )
        for row in store.all(f"SELECT * FROM {kind.table}"):
            for ln in kind.links:
                evaluate_policy(store, kind, ln, row, fresh=True)


# ------------------------------------------------------------------ crud listeners
def on_entity(side: Side, ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
    """The listener of one side's entities (registered on their Resource by
    ``resources/policies.py``; an edge router deleted through /routers or /transit-routers
    notifies the edge routers' listeners too)."""
    if values is None:
        entity_deleted(ctx.store, side, id)
    else:
        entity_written(ctx.store, side, id, before)


def after_policy_write(kind: Kind):
    def hook(ctx: Ctx, id: str, before: dict | None, values: dict | None) -> None:
        policy_written(ctx.store, kind, id, before)

    return hook
