"""The router data model's entities, declared once each, and the writes that mark them changed.

A v2.0 router holds config types, configs, identities, services, posture checks, service
policies with their links, public keys and revocations. Each kind of them is one ``Kind`` here:
its place in the order events are sent, its ``Event`` field and model message, one SQL reading
its rows (``{where}`` chooses them: some ids, or the next chunk of a full reading), how a row
becomes its model, and the tables whose row changes mark one of its entities as changed
(``Mark``: the table and the column naming the entity). A policy's links are ``LinkTable``s.
A new kind (say, revocations of a new source) is one more ``Kind`` in ``KINDS``.

The marks come from the write path itself: temporary triggers of the controller's connection
(never in the file), one per watched table and operation, hand the row's key to ``zl_rdm``,
whichever code made the change (the generic handlers, hand-written operations, the policy
engine's link upkeep, foreign-key cascades). So a change costs what it changes: the data model
re-reads the marked rows only, at its next tick, and a write that rolled back re-reads rows
that are as they were (no event). Rows are kept compactly: one bytes object per entity, the
entity's ``Event`` already framed as a ``DataState`` entry, so a full state is one join.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import apsw

from .. import clock
from ..db import store as db_store
from . import messages, pb
from .pb import Field, Msg, read_varint, varint

# event kinds in the order a full state lists them (a link needs its policy and its entities)
CONFIG_TYPE, CONFIG, IDENTITY, SERVICE, POSTURE_CHECK, POLICY, PUBLIC_KEY, REVOCATION = range(8)
LINK_FIELD = 16
_PRECEDENCE = {"default": 0, "required": 1, "failed": 2}
ALL_OPS = ("INSERT", "UPDATE", "DELETE")


@dataclass(frozen=True)
class Mark:
    """Row changes of ``table`` mark the entity named by its column ``key`` as changed
    (``columns``: only updates of these count; every update when empty)."""
    table: str
    key: str = "id"
    ops: tuple[str, ...] = ALL_OPS
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    order: int
    field: int                      # its field in upstream's ``Event``
    msg: Msg
    sql: str                        # SELECT ... WHERE {where}: rows with an ``id`` column
    build: Callable[[dict], dict]
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class LinkTable:
    related: int                    # upstream's ServicePolicyRelatedEntityType
    table: str
    column: str


_EMPTY = frozenset(("", "{}", "[]"))


def _json(text: str | None, default: Any) -> Any:
    if text is None or text in _EMPTY:      # most rows: no parse
        return default
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def _identity(r: dict) -> dict:
    app = _json(r["app_data"], {})
    own: dict[str, dict[str, str]] = {}
    for sid, type_id, cid in _json(r["own"], []):
        own.setdefault(sid, {})[type_id] = cid
    return {
        "id": r["id"], "name": r["name"],
        "defaultHostingPrecedence": _PRECEDENCE.get(r["default_hosting_precedence"], 0),
        "defaultHostingCost": r["default_hosting_cost"],
        "serviceHostingPrecedences": {k: _PRECEDENCE.get(v, 0) for k, v in
                                      _json(r["service_hosting_precedences"], {}).items()},
        "serviceHostingCosts": {k: int(v) for k, v in _json(r["service_hosting_costs"], {}).items()},
        "appDataJson": json.dumps(app, separators=(",", ":")).encode() if app else b"",
        "serviceConfigs": {sid: {"configs": configs} for sid, configs in sorted(own.items())},
        "disabled": disabled(r)}


def disabled(r: dict) -> bool:
    """Disabled now: ``disabled_at`` set and no ``disabled_until`` or one still to come."""
    return r["disabled_at"] is not None and (r["disabled_until"] is None or r["disabled_until"] > clock.stamp())


def _posture_check(r: dict) -> dict:
    out: dict[str, Any] = {"id": r["id"], "name": r["name"], "typeId": r["type_id"]}
    kind = r["type_id"]
    if kind == "MAC":
        out["mac"] = {"macAddresses": _json(r["mac_addresses"], [])}
    elif kind == "MFA":
        out["mfa"] = {"timeoutSeconds": r["timeout_seconds"] or 0, "promptOnWake": bool(r["prompt_on_wake"]),
                      "promptOnUnlock": bool(r["prompt_on_unlock"]),
                      "ignoreLegacyEndpoints": bool(r["ignore_legacy_endpoints"])}
    elif kind == "OS":
        out["osList"] = {"osList": [{"osType": o.get("type", ""), "osVersions": o.get("versions") or []}
                                    for o in _json(r["operating_systems"], [])]}
    elif kind == "DOMAIN":
        out["domains"] = {"domains": _json(r["domains"], [])}
    elif kind == "PROCESS":
        p = _json(r["process"], {})
        out["process"] = {"osType": p.get("osType", ""), "path": p.get("path", ""), "hashes": p.get("hashes") or [],
                          "fingerprints": [p["signerFingerprint"]] if p.get("signerFingerprint") else []}
    elif kind == "PROCESS_MULTI":
        out["processMulti"] = {"semantic": r["semantic"] or "", "processes": [
            {"osType": p.get("osType", ""), "path": p.get("path", ""), "hashes": p.get("hashes") or [],
             "fingerprints": p.get("signerFingerprints") or []} for p in _json(r["processes"], [])]}
    return out


def stamp(seconds: float) -> dict:
    return {"seconds": int(seconds), "nanos": int((seconds % 1) * 1e9)}


def _revocation(r: dict) -> dict:
    """An entry of the revocation list with its type; an IDENTITY one's cut-off (issuedBefore) is
    when it was made."""
    out = {"id": r["id"], "expiresAt": stamp(clock.parse(r["expires_at"]).timestamp()), "type": r["type"]}
    if r["type"] == "IDENTITY":
        out["issuedBefore"] = stamp(clock.parse(r["created_at"]).timestamp())
    return out


_IDENTITY_COLUMNS = ("name", "default_hosting_precedence", "default_hosting_cost", "service_hosting_precedences",
                     "service_hosting_costs", "app_data", "disabled_at", "disabled_until")

KINDS: tuple[Kind, ...] = (
    Kind(CONFIG_TYPE, 17, messages.RDM_CONFIG_TYPE, "SELECT id, name FROM config_types WHERE {where}",
         lambda r: {"id": r["id"], "name": r["name"]}, (Mark("config_types", columns=("name",)),)),
    Kind(CONFIG, 18, messages.RDM_CONFIG, "SELECT id, config_type_id, name, data FROM configs WHERE {where}",
         lambda r: {"id": r["id"], "typeId": r["config_type_id"], "name": r["name"],
                    "dataJson": json.dumps(_json(r["data"], {}), separators=(",", ":"))},
         (Mark("configs", columns=("config_type_id", "name", "data")),)),
    Kind(IDENTITY, 10, messages.RDM_IDENTITY,
         f"SELECT id, {', '.join(_IDENTITY_COLUMNS)}, (SELECT json_group_array(json_array(c.service_id,"
         " c.config_type_id, c.config_id)) FROM identity_service_configs c WHERE c.identity_id = identities.id) AS own"
         " FROM identities WHERE {where}", _identity,
         (Mark("identities", columns=_IDENTITY_COLUMNS), Mark("identity_service_configs", "identity_id"))),
    Kind(SERVICE, 11, messages.RDM_SERVICE, "SELECT id, name, encryption_required, configs FROM services WHERE {where}",
         lambda r: {"id": r["id"], "name": r["name"], "encryptionRequired": bool(r["encryption_required"]),
                    "configs": _json(r["configs"], [])},
         (Mark("services", columns=("name", "encryption_required", "configs")),)),
    Kind(POSTURE_CHECK, 13, messages.RDM_POSTURE_CHECK, "SELECT * FROM posture_checks WHERE {where}", _posture_check,
         (Mark("posture_checks"),)),
    Kind(POLICY, 12, messages.RDM_SERVICE_POLICY, "SELECT id, name, type FROM service_policies WHERE {where}",
         lambda r: {"id": r["id"], "name": r["name"],
                    "policyType": messages.RDM_POLICY_DIAL if r["type"] == "Dial" else messages.RDM_POLICY_BIND},
         (Mark("service_policies", columns=("name", "type")),)),
    # public keys come from the controller's certificates (no table): see DataModel.public_keys
    Kind(PUBLIC_KEY, 14, messages.RDM_PUBLIC_KEY, "", lambda r: r, ()),
    # the revocation list (/revocations and the OIDC provider's own); revocations of API sessions
    # that ended and identities disabled or deleted are the data model's own (DataModel.revoked),
    # under the same kind
    Kind(REVOCATION, 15, messages.RDM_REVOCATION,
         "SELECT id, type, created_at, expires_at FROM revocations WHERE {where}", _revocation,
         (Mark("revocations"),)),
)
BY_ORDER = {k.order: k for k in KINDS}
SQL_KINDS = tuple(k for k in KINDS if k.sql)

LINKS = (LinkTable(messages.RDM_RELATED_SERVICE, "service_policy_services", "service_id"),
         LinkTable(messages.RDM_RELATED_POSTURE_CHECK, "service_policy_posture_checks", "posture_check_id"),
         LinkTable(messages.RDM_RELATED_IDENTITY, "service_policy_identities", "identity_id"))

# rows whose going is news of its own: an API session that ended is revoked for as long as an
# access token naming it may live
ENDED_SESSIONS = Mark("api_sessions", ops=("DELETE",))

IDS = "id IN (SELECT value FROM json_each(?1))"
CHUNK = "id > ?1 ORDER BY id LIMIT ?2"


# ---------------------------------------------------------------------- framing
def _tag(num: int) -> bytes:
    return varint(num << 3 | 2)


_TAGS = {k.order: _tag(k.field) for k in KINDS}
_WRAP = {k.order: Msg("Event", (Field(1, "action", "enum"), Field(3, "isSynthetic", "bool"),
                                Field(k.field, "m", "bytes"))) for k in KINDS}
_LINK_WRAP = Msg("Event", (Field(1, "action", "enum"), Field(LINK_FIELD, "m", "bytes")))


def event(kind: int, action: int, model: bytes, synthetic: bool = False) -> bytes:
    return pb.encode(_WRAP[kind], {"action": action, "isSynthetic": synthetic, "m": model})


def entry(kind: int, model: bytes) -> bytes:
    """The creation event of ``model`` framed as one ``DataState.events`` entry: what the model
    keeps per entity (a full state is their join)."""
    ev = b"".join((_TAGS[kind], varint(len(model)), model))
    return b"".join((b"\x0a", varint(len(ev)), ev))


def model_of(framed: bytes) -> bytes:
    """The model message inside an ``entry``."""
    _, pos = read_varint(framed, 1)          # the DataState entry's length
    _, pos = read_varint(framed, pos)        # the Event field's tag
    _, pos = read_varint(framed, pos)        # the model's length
    return framed[pos:]


def link_event(policy_id: str, related: int, ids: Iterable[str], add: bool) -> bytes:
    model = pb.encode(messages.RDM_POLICY_CHANGE, {"policyId": policy_id, "relatedEntityIds": sorted(ids),
                                                   "relatedEntityType": related, "add": add})
    return pb.encode(_LINK_WRAP, {"action": messages.RDM_ACTION_CREATE, "m": model})


_SHORT = [bytes((n,)) for n in range(128)]


def _strings(num: int, values: Iterable[str]) -> bytes:
    """A repeated string field: what ``pb.encode`` makes of it, four times faster (a policy
    matching every identity lists them all)."""
    tag = _tag(num)
    return b"".join([tag + (_SHORT[len(b)] if len(b) < 128 else varint(len(b))) + b
                     for b in [v.encode() for v in values]])


def id_list(ids: Iterable[str]) -> bytes:
    """``relatedEntityIds`` of a ``ServicePolicyChange`` (a part of them: the parts join)."""
    return _strings(2, ids)


def link_entry(policy_id: str, related: int, ids: Iterable[str], encoded: bytes | None = None) -> bytes:
    """All of a policy's links of one related type as a ``DataState`` entry (``encoded``: their
    ``id_list``, when it was made in parts)."""
    model = pb.encode(messages.RDM_POLICY_CHANGE, {"policyId": policy_id, "relatedEntityIds": [],
                                                   "relatedEntityType": related, "add": True}) + \
        (encoded if encoded is not None else _strings(2, ids))
    ev = b"".join((_tag(LINK_FIELD), varint(len(model)), model))
    return b"".join((b"\x0a", varint(len(ev)), ev))


def state_tail(index: int, timeline: str) -> bytes:
    """``endIndex`` and ``timelineId`` of a ``DataState`` (after its events)."""
    return pb.encode(messages.DATA_STATE, {"events": [], "endIndex": index, "timelineId": timeline})


# ---------------------------------------------------------------------- reading
def read(store: Any, kind: Kind, ids: Iterable[str]) -> dict[str, tuple[bytes, dict]]:
    """The current model of the entities ``ids`` of ``kind`` that exist: id -> (model, row)."""
    out = {}
    for r in store.all(kind.sql.format(where=IDS), (json.dumps(list(ids)),)):
        out[sys.intern(r["id"])] = (pb.encode(kind.msg, kind.build(r)), r)
    return out


class Snapshot:
    """A connection of its own for a full reading: one read transaction (a consistent view
    while the API writes on) and a small page cache, closed after, so that reading every
    identity once does not leave the API's connection's 64 MiB cache full of them. A database
    that is no file is read through the store itself."""

    def __init__(self, store: Any):
        self.store: Any = None
        self.conn: Any = None
        if store.path == ":memory:" or not store.path:
            self.store = store
            return
        self.conn = db_store.connect(store.path, statistics=False)
        self.conn.execute("PRAGMA cache_size = -2048")
        self.conn.execute("BEGIN")

    @property
    def writing(self) -> bool:
        return self.store is not None and self.store.writing

    def all(self, sql: str, params: Any = ()) -> list[dict]:
        if self.store is not None:
            return self.store.all(sql, params)
        cur = self.conn.execute(sql, params)
        try:
            names = [d[0] for d in cur.getdescription()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(names, r)) for r in cur]

    def rows(self, sql: str, params: Any = ()) -> list[tuple]:
        return list((self.store.conn if self.store is not None else self.conn).execute(sql, params))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.execute("COMMIT")
            self.conn.close()
            self.conn = None


def chunk_rows(store: Any, kind: Kind, after: str, size: int) -> list[dict]:
    """The next ``size`` rows of ``kind`` by id after ``after``."""
    return store.all(kind.sql.format(where=CHUNK), (after, size))


def encode(kind: Kind, row: dict) -> tuple[str, bytes]:
    """A row's id (the one string object for it) and its model."""
    return sys.intern(row["id"]), pb.encode(kind.msg, kind.build(row))


def read_chunk(store: Any, kind: Kind, after: str, size: int) -> list[tuple[str, bytes, dict]]:
    """The next ``size`` entities of ``kind`` by id after ``after``: (id, model, row)."""
    return [(*encode(kind, r), r) for r in chunk_rows(store, kind, after, size)]


def read_links_chunk(snap: Snapshot, link: LinkTable, after: tuple[str, str], size: int) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in snap.rows(
        f"SELECT policy_id, {link.column} FROM {link.table} WHERE (policy_id, {link.column}) > (?1, ?2)"  # noqa: S608
        f" ORDER BY policy_id, {link.column} LIMIT ?3", (*after, size))]


def links_present(store: Any, link: LinkTable, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of the (policy, entity) ``pairs`` are links now."""
    return {(r[0], r[1]) for r in store.conn.execute(
        f"SELECT policy_id, {link.column} FROM {link.table} WHERE (policy_id, {link.column}) IN"  # noqa: S608
        " (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))",
        (json.dumps(pairs),))}


# ---------------------------------------------------------------------- the triggers
def triggers(marks: list[tuple[Mark, str]]) -> tuple[str, str]:
    """SQL creating and dropping the temporary triggers of ``marks`` (each with the key
    expression its row hands to ``zl_rdm(number, key, second)``)."""
    create, drop = [], []
    for n, (mark, second) in enumerate(marks):
        for op in mark.ops:
            image = "OLD" if op == "DELETE" else "NEW"
            name = f"zl_rdm_{n}_{op.lower()}"
            on = f"UPDATE OF {', '.join(mark.columns)}" if op == "UPDATE" and mark.columns else op
            args = f"{n}, {image}.{mark.key}, " + (f"{image}.{second}" if second else "NULL")
            create.append(f"CREATE TEMP TRIGGER IF NOT EXISTS {name} AFTER {on} ON main.{mark.table}"
                          f" BEGIN SELECT zl_rdm({args}); END;")
            if op == "UPDATE" and mark.key != "id":     # a row moved to another entity: both change
                create.append(f"CREATE TEMP TRIGGER IF NOT EXISTS {name}_old AFTER UPDATE ON main.{mark.table}"
                              f" WHEN OLD.{mark.key} IS NOT NEW.{mark.key} BEGIN SELECT zl_rdm({n}, OLD.{mark.key},"
                              f" {'OLD.' + second if second else 'NULL'}); END;")
                drop.append(f"DROP TRIGGER IF EXISTS temp.{name}_old;")
            drop.append(f"DROP TRIGGER IF EXISTS temp.{name};")
    return "\n".join(create), "\n".join(drop)
