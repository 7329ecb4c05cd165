"""The audit trail: who changed what, and every login's outcome, in the ``audit_log`` table.

A row is written for each POST, PUT, PATCH or DELETE of the management API that succeeded
(one per request, naming the caller, its API session and address, the operation, the entity and
the changed fields with old and new values, secrets redacted): for the generic handlers inside
the write's transaction (``write_change``, from ``changes.py``), for hand-written operations
after it (``ops.after_change``). And one after each login attempt on either API
(``methods.on_login``, which also emits the ``authentication`` event). Admins list it at
``GET /ziti-lite/v1/audit`` (filter, sort, paging); ``ziti-lite audit`` reads it from the file.
Retention (``prune``) runs once a minute while serving: rows older than ``--audit-days`` and
the oldest beyond ``--audit-max-rows`` go.

A hand-written operation's row is written in its own transaction right after the request's: a
crash between the two loses that row, never the change.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import apsw
import msgspec

from .. import clock, integrity
from ..api import crud
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import after_change, op
from ..api.resource import Field, Resource
from ..auth.methods import Login, on_login
from ..db.filters import Symbol
from ..errors import ApiError
from . import shapes

log = logging.getLogger("ziti_lite.events")
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()

COLUMNS = ("id", "created_at", "identity_id", "identity_name", "api_session_id", "remote_address", "operation",
           "method", "path", "entity_type", "entity_id", "entity_name", "outcome", "reason", "changes")

# the list's fields: a Resource that is never mounted as a collection, for the generic list
AUDIT = Resource(
    name="audit", entity="audit row", table="audit_log", ops=(),
    fields=(Field("identityId", nullable=True), Field("identityName", nullable=True),
            Field("apiSessionId", nullable=True), Field("remoteAddress"), Field("operation"), Field("method"),
            Field("path"), Field("entityType", nullable=True), Field("entityId", nullable=True),
            Field("entityName", nullable=True), Field("outcome"), Field("reason", nullable=True),
            Field("changes", "json")),
    filters=("identityId", "identityName", "apiSessionId", "remoteAddress", "operation", "method", "path",
             "entityType", "entityId", "entityName", "outcome", "reason"),
)
SYMBOLS = {"id": Symbol("string", "t.id"), "createdAt": Symbol("datetime", "t.created_at"),
           **{name: AUDIT.symbols[name] for name in AUDIT.filters}}
# the current-* paths name the caller's own entities
_SELF = {"current-api-session": "api-sessions", "current-identity": "identities"}
# client-API paths whose writes are audited (the caller's own credentials; events/changes.py)
CLIENT_AUDITED = ("/current-identity/", "/current-api-session/certificates")
# the login operations (a row per outcome, from ``login`` below)
_LOGINS = frozenset(("authenticate", "authenticateMfa"))
# method names as upstream's authentication events give them
# (``mfa``: the TOTP step of a login, POST /authenticate/mfa; ziti-lite's own)
_METHODS = {"password": "updb", "cert": "cert", "ext-jwt": "ext-jwt", "mfa": "mfa"}


_INSERT = f"INSERT INTO audit_log ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


_last_id = [0]


def id_at(t: dt.datetime) -> int:
    """The smallest row id of time ``t``: its microseconds since the epoch times 256."""
    return int(t.timestamp() * 1_000_000) * 256


def new_row_id(now: dt.datetime | None = None) -> int:
    """Row ids that grow with time (the table's rowid: each insert appends, the list's default
    order by id is time order, and retention and ``since`` read id ranges): the controller
    clock's microseconds times 256, past the last one given in the same microsecond (a clock
    set back gives smaller ids: a row's id stays its time)."""
    id = id_at(now or clock.now())
    if id <= _last_id[0] < id + 256:
        id = _last_id[0] + 1
    _last_id[0] = id
    return id


def write(store: Any, redacted: bool = False, **values: Any) -> str:
    """Insert one row (``changes`` redacted here unless it comes ``redacted`` already)."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(values)
    changes = row["changes"] or {}
    now = clock.now()
    row["id"] = new_row_id(now)
    row["created_at"] = clock.fmt(now)
    row["changes"] = _enc.encode(changes if redacted else shapes.redact(changes)).decode()
    row["remote_address"] = row["remote_address"] or ""
    row["outcome"] = row["outcome"] or "success"
    return _store(store, [row[c] for c in COLUMNS])


def _store(store: Any, params: list[Any]) -> str:
    """Insert a row's values (in ``COLUMNS`` order): in the write under way, else in its own."""
    if store.writing:   # the change's own transaction (a savepoint would only add cost)
        _insert(store, params)
    else:
        with store.write():
            _insert(store, params)
    return str(params[0])


def _insert(store: Any, params: list[Any]) -> None:
    for _ in range(100):
        try:
            store.execute(_INSERT, params)
            return
        except apsw.ConstraintError:   # the same microsecond in another process: the next id
            params[0] += 1
    raise RuntimeError("no free audit row id")


_SKIP = frozenset(("id", "createdAt", "updatedAt"))


def diff(before: dict | None, after: dict | None) -> dict[str, dict[str, Any]]:
    """field -> {old, new} for every field that differs (all of them on create and delete)."""
    if before is None:   # a create: every field that has a value
        return {} if after is None else \
            {k: {"old": None, "new": v} for k, v in after.items() if v is not None and k not in _SKIP}
    if after is None:    # a delete
        return {k: {"old": v, "new": None} for k, v in before.items() if v is not None and k not in _SKIP}
    b, a = before, after
    return {k: {"old": b.get(k), "new": a.get(k)} for k in dict.fromkeys([*b, *a])
            if k not in _SKIP and b.get(k) != a.get(k)}


def _name(store: Any, collection: str | None, id: str | None) -> str | None:
    if not collection or not id:
        return None
    try:
        return store.value(f"SELECT name FROM {collection.replace('-', '_')} WHERE id = ?", (id,))
    except apsw.SQLError:   # a collection without names (or without a table of its own)
        return None


def caller_name(ctx: Ctx) -> str | None:
    """The name of the caller's identity (None without a session), as its session lookup read it."""
    session = ctx.session
    return session.identity_name if session is not None else None


def _caller(ctx: Ctx, name: str | None = None) -> dict[str, Any]:
    session = ctx.session
    identity_id = session.identity_id if session is not None else None
    return {"identity_id": identity_id, "api_session_id": session.id if session is not None else None,
            "identity_name": name if name is not None else caller_name(ctx), "remote_address": ctx.client_ip}


def audits(ctx: Ctx) -> bool:
    """Whether the request's writes are audited: every write of the management API, and the
    client API's writes of the caller's own credentials (its MFA enrollment, its authenticators,
    its API session's certificates). Logins are not: they have their login-outcome row."""
    if ctx.route.op_id in _LOGINS:
        return False
    if ctx.api == "management":
        return True
    return ctx.api == "client" and ctx.session is not None and ctx.route.path.startswith(CLIENT_AUDITED)


@after_change
def request_changed(ctx: Ctx, response: Any) -> None:
    """One row for a successful audited write not reported through ``crud.changed`` (logins
    have their own, below)."""
    route = ctx.route
    if ctx.audited or ctx.ctl.settings.audit_days <= 0 or not audits(ctx):
        return
    try:
        _record(ctx, response)
    except Exception:  # the change is made and answered: a failing audit write is logged, not raised
        log.exception("audit row of %s %s", route.method, route.path)


def write_change(ctx: Ctx, collection: str, id: str, before: dict | None, after: dict | None,
                 caller: str | None = None) -> None:
    """The audit row of a request that wrote ``collection``/``id`` through the generic handlers,
    in the write's own transaction (``changes.py`` calls it); the states come redacted."""
    route = ctx.route
    session = ctx.session
    name = (after or before or {}).get("name")
    # the row in COLUMNS order, built directly: every audited write pays this; its time is the
    # write's own where a generic create/update stamped the row (its new updatedAt), else now
    stamp = after.get("updatedAt") if after is not None and route.resource is not None else None
    now = clock.now()
    _store(ctx.store, [
        new_row_id(now), stamp if isinstance(stamp, str) else clock.fmt(now),
        session.identity_id if session is not None else None,
        caller if caller is not None else caller_name(ctx), (session.id or None) if session is not None else None,
        ctx.client_ip or "", route.op_id, route.method, ctx.request.scope["path"], collection, id, name, "success",
        None, _enc.encode(diff(before, after)).decode()])


def _record(ctx: Ctx, response: Any) -> None:
    """The row of a hand-written operation: the entity from its path (or the created id), the
    fields the request set."""
    route = ctx.route
    segments = [s for s in route.path.split("/") if s]
    collection = segments[0] if segments else None
    entity_id = ctx.params.get("id")
    if collection in _SELF:
        entity_id = ctx.session.id if collection == "current-api-session" and ctx.session else \
            (ctx.session.identity_id if ctx.session else None)
        collection = _SELF[collection]
    changes: dict[str, Any] = {}
    if entity_id is None and response.status_code == 201:
        try:
            entity_id = _dec.decode(response.body)["data"]["id"]
        except (msgspec.DecodeError, KeyError, TypeError):
            entity_id = None
    body = ctx._body
    if body:
        try:
            sent = _dec.decode(body)
        except msgspec.DecodeError:
            sent = None
        if isinstance(sent, dict):
            changes = {k: {"old": None, "new": v} for k, v in shapes.redact(sent).items()}
    write(ctx.store, **_caller(ctx), operation=route.op_id, method=route.method, path=ctx.request.scope["path"],
          entity_type=collection, entity_id=entity_id, entity_name=_name(ctx.store, collection, entity_id),
          changes=changes)


@on_login
def login(ctx: Ctx, method: str, done: Login | None, api_session_id: str | None, error: Exception | None,
          username: str | None) -> None:
    """The ``authentication`` event and the audit row of a login attempt."""
    try:
        _login(ctx, method, done, api_session_id, error, username)
    except Exception:
        log.exception("login outcome of method %s", method)


def _login(ctx: Ctx, method: str, done: Login | None, api_session_id: str | None, error: Exception | None,
           username: str | None) -> None:
    store = ctx.store
    identity_id = authenticator_id = None
    if done is not None:
        identity_id, authenticator_id = done.identity_id, done.authenticator_id
    elif method == "password" and username:
        found = store.one("SELECT id, identity_id FROM authenticators WHERE method = 'updb' AND username = ?",
                          (username,))
        if found is not None:
            identity_id, authenticator_id = found["identity_id"], found["id"]
    reason = ""
    if error is not None:
        reason = error.code if isinstance(error, ApiError) else type(error).__name__
    bus = ctx.ctl.events
    if bus.wants("authentication"):
        policy = store.value("SELECT auth_policy_id FROM identities WHERE id = ?", (identity_id,)) if identity_id \
            else None
        bus.emit(shapes.authentication(
            bus.source_id, error is None, _METHODS.get(method, method), authenticator_id=authenticator_id or "",
            identity_id=identity_id or "", auth_policy_id=policy or "", remote_address=ctx.client_ip,
            reason=reason))
    if ctx.ctl.settings.audit_days > 0:
        write(store, identity_id=identity_id, identity_name=_name(store, "identities", identity_id),
              api_session_id=api_session_id, remote_address=ctx.client_ip,
              operation="authenticateMfa" if method == "mfa" else "authenticate",
              method=ctx.route.method, path=ctx.request.scope["path"], entity_type="api-sessions",
              entity_id=api_session_id, outcome="success" if error is None else "failure", reason=reason or None,
              changes={"method": {"old": None, "new": method}})


def render(ctx: Ctx, row: dict) -> dict:
    return {
        "id": str(row["id"]), "createdAt": row["created_at"], "identityId": row["identity_id"],
        "identityName": row["identity_name"], "apiSessionId": row["api_session_id"],
        "remoteAddress": row["remote_address"], "operation": row["operation"], "method": row["method"],
        "path": row["path"], "entityType": row["entity_type"], "entityId": row["entity_id"],
        "entityName": row["entity_name"], "outcome": row["outcome"], "reason": row["reason"],
        "changes": msgspec.Raw(row["changes"]),
    }


@op("GET", "/ziti-lite/v1/audit", apis=("client",), auth="admin", op_id="listAudit", tag="ziti-lite",
    query=("limit", "offset", "filter", "sort"), perm=("ops", "read"))
async def list_audit(ctx: Ctx) -> env.JSON:
    """The audit trail, as any list: ``filter``, ``sort``, ``limit``/``offset``, totalCount."""
    return crud.list_response(ctx, AUDIT, render_row=render, symbols=SYMBOLS)


def prune(store: Any, days: float, max_rows: int) -> int:
    """Delete rows older than ``days`` and the oldest beyond ``max_rows``; the number deleted."""
    cutoff = id_at(clock.now() - dt.timedelta(days=days))
    with store.write():
        store.execute("DELETE FROM audit_log WHERE id < ?", (cutoff,))   # ids grow with time: a rowid range
        gone = store.value("SELECT changes()")
        # the newest max_rows are those from the max_rows-th largest id on
        store.execute("DELETE FROM audit_log WHERE id < (SELECT id FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?)",
                      (max_rows - 1,))
        gone += store.value("SELECT changes()")
    return gone


def query(store: Any, since: str | None = None, identity: str | None = None, entity: str | None = None,
          limit: int = 1000) -> list[dict]:
    """Rows for ``ziti-lite audit``, oldest first: since a time stamp, of one identity (name or
    id), of one entity type (collection name)."""
    where: list[str] = ["1"]
    params: list[Any] = []
    if since:
        where.append("id >= ?")   # ids grow with time: a rowid range
        params.append(id_at(clock.parse(since)))
    if identity:
        where.append("(identity_name = ? OR identity_id = ?)")
        params += [identity, identity]
    if entity:
        where.append("entity_type = ?")
        params.append(entity)
    rows = store.all(f"SELECT * FROM audit_log WHERE {' AND '.join(where)} ORDER BY id DESC"
                     " LIMIT ?", [*params, limit])
    return rows[::-1]


@integrity.check
def audit_rows(store: Any) -> Iterator[integrity.Problem]:
    """Every audit row has a time, an operation and changes that are a JSON object."""
    for row in store.all("SELECT id, created_at, changes FROM audit_log WHERE CASE WHEN json_valid(changes)"
                         " THEN json_type(changes) != 'object' ELSE 1 END"
                         " OR created_at NOT GLOB '[0-9][0-9][0-9][0-9]-*'"):
        yield integrity.Problem(f"audit row {row['id']} has an invalid time or changes")
