"""API sessions: opaque UUID tokens in the ``zt-session`` header, a sliding inactivity timeout.

Last activity is kept in memory per process and written to the row about once a minute (by
``lookup`` and the janitor's ``expire``), so a read request costs one indexed lookup and no write.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from .. import clock, permissions
from ..api.caller import Session as Session  # made here; the type sits below, for Ctx
from ..ids import new_sortable_id, new_token
from . import extjwt
from .policy import parse_secondary

FLUSH_SECONDS = 60


if TYPE_CHECKING:
    from ..config import Settings
    from ..db.store import Generation, Store


class AuthController(Protocol):
    """The controller as the auth modules see it (see ``lifecycle.contexts.LifecycleController``)."""
    settings: Settings
    store: Store
    state: dict[str, str]
    activity: dict[str, str]
    session_rows: tuple[Generation, dict[str, Any]] | None
    extjwt_keys: dict[str, Any]
    oidc_verified: dict[str, dict]
    router_lines: dict[str, str]        # real router id -> the version its last hello named



_LOOKUP = (
    "SELECT s.id, s.token, s.identity_id, s.authenticator_id, s.last_activity_at, s.is_mfa_required,"
    " s.is_mfa_complete, i.is_admin, i.is_default_admin, i.disabled_at, i.disabled_until, p.secondary,"
    " i.name AS identity_name, i.permissions"
    " FROM api_sessions s CROSS JOIN identities i ON i.id = s.identity_id"
    " LEFT JOIN auth_policies p ON p.id = i.auth_policy_id WHERE s.token = ?"
)


def totp_outstanding(row: dict, secondary: dict) -> bool:
    """TOTP is owed while the session needs it (verified enrollment at login, or the policy's
    ``requireTotp``) and has not given it."""
    return bool(row["is_mfa_required"] or secondary.get("requireTotp")) and not row["is_mfa_complete"]


def is_partial(ctl: AuthController, row: dict, headers=None) -> bool:
    """A session is partial while a secondary factor it needs is missing: TOTP, or a valid
    bearer JWT from the policy's ``requireExtJwtSigner`` on this very request."""
    secondary = parse_secondary(row.get("secondary"))
    if totp_outstanding(row, secondary):
        return True
    signer_id = secondary.get("requireExtJwtSigner")
    if signer_id:
        return not extjwt.secondary_ok(ctl, signer_id, row["identity_id"], headers)
    return False


async def warm(ctl: AuthController, headers) -> None:
    """Before a synchronous lookup: fetch JWKS keys a bearer JWT on the request may need."""
    if headers is not None and "authorization" in headers:
        await extjwt.warm(ctl, headers)


_MISSING = object()
_CACHE_MAX = 10_000


def _session_row(ctl: AuthController, token: str) -> dict | None:
    """The session row of ``token`` (joined with its identity and auth policy), or None.

    Rows are cached per process and the whole cache is dropped whenever the database may have
    changed (``Store.generation``: ~1.6 µs against ~15 µs for the three-table lookup, and every
    request that carries a session pays this).
    """
    gen = ctl.store.generation()
    cache = ctl.session_rows
    if cache is None or cache[0] != gen:
        cache = ctl.session_rows = (gen, {})
    rows = cache[1]
    row = rows.get(token, _MISSING)
    if row is _MISSING:
        try:
            uuid.UUID(token)
        except ValueError:
            return None  # upstream ignores a zt-session that is not a UUID
        row = ctl.store.one(_LOOKUP, (token,))
        if row is not None:
            row["permissions"] = permissions.parse(row["permissions"])
        if len(rows) < _CACHE_MAX:
            rows[token] = row
    return row


_earlier_memo: dict[tuple[str, int], str] = {}


def _earlier(stamp: str, now: dt.datetime, seconds: int) -> str:
    """``clock.fmt(now - seconds)``: a whole number of seconds leaves the ``.mmmZ`` tail of the
    stamp as it is, so the date-time part is computed once per second."""
    if not isinstance(seconds, int):
        return clock.fmt(now - dt.timedelta(seconds=seconds)) or ""
    key = (stamp[:19], seconds)
    head = _earlier_memo.get(key)
    if head is None:
        if len(_earlier_memo) > 64:
            _earlier_memo.clear()
        head = _earlier_memo[key] = (clock.fmt(now - dt.timedelta(seconds=seconds)) or "")[:19]
    return head + stamp[19:]


def lookup(ctl: AuthController, token: str | None, headers=None) -> Session | None:
    if not token:
        return None
    row = _session_row(ctl, token)
    if row is None:
        return None
    now = clock.now()
    stamp = clock.fmt(now)
    assert stamp is not None
    if row["disabled_at"] and (not row["disabled_until"] or row["disabled_until"] > stamp):
        return None
    last = max(row["last_activity_at"], ctl.activity.get(token, ""))
    if last < _earlier(stamp, now, ctl.settings.session_timeout):
        with ctl.store.write():
            ctl.store.execute("DELETE FROM api_sessions WHERE id = ?", (row["id"],))
        ctl.activity.pop(token, None)
        return None
    ctl.activity[token] = stamp
    if row["last_activity_at"] < _earlier(stamp, now, FLUSH_SECONDS):
        with ctl.store.write():
            ctl.store.execute("UPDATE api_sessions SET last_activity_at = ? WHERE id = ?", (stamp, row["id"]))
    return Session(row["id"], token, row["identity_id"], bool(row["is_admin"] or row["is_default_admin"]),
                   row["authenticator_id"], is_partial(ctl, row, headers), stamp, identity_name=row["identity_name"],
                   permissions=row["permissions"])


def create(ctl: AuthController, identity_id: str, authenticator_id: str, ip: str, config_types: list[str],
           mfa_required: bool = False, cert_extendable: bool = False, improper_chain: bool = False,
           id: str | None = None) -> dict:
    """A new API session row (``id``: the OIDC provider's, a UUID; else a sortable one)."""
    now = clock.stamp()
    row = {
        "id": id or new_sortable_id(), "created_at": now, "updated_at": now, "token": new_token(),
        "identity_id": identity_id, "authenticator_id": authenticator_id, "ip_address": ip,
        "config_types": config_types, "is_mfa_required": int(mfa_required), "is_mfa_complete": 0,
        "is_cert_extendable": int(cert_extendable), "last_activity_at": now,
        "improper_client_cert_chain": int(improper_chain),
    }
    with ctl.store.write():
        ctl.store.execute(
            "INSERT INTO api_sessions (id, created_at, updated_at, token, identity_id, authenticator_id, ip_address,"
            " config_types, is_mfa_required, is_mfa_complete, is_cert_extendable, last_activity_at,"
            " improper_client_cert_chain) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (row["id"], now, now, row["token"], identity_id, authenticator_id, ip, json.dumps(config_types),
             row["is_mfa_required"], 0, row["is_cert_extendable"], now, row["improper_client_cert_chain"]))
    return row


def cert_flags(store, row: dict) -> dict:
    """The certificate fields of an API session's detail, as upstream: whether its certificate
    authenticator was asked to extend (and roll keys), read from the authenticator now, and
    whether its login needed an intermediate it did not send. A false one is left out."""
    out = {}
    auth = store.one("SELECT is_extend_requested, is_key_roll_requested FROM authenticators"
                     " WHERE id = ? AND method = 'cert'", (row["authenticator_id"],))
    if auth is not None and auth["is_extend_requested"]:
        out["isCertExtendRequested"] = True
        if auth["is_key_roll_requested"]:
            out["isCertKeyRollRequested"] = True
    if row.get("improper_client_cert_chain"):
        out["improperClientCertChain"] = True
    return out


def resolve_config_types(store, requested) -> list[str]:
    """Config type ids (or ``["all"]``) for names or ids, as a login or a service list asks for them
    (a comma-separated string or a list); unknown ones are left out."""
    if requested is None:
        return []
    values = [v.strip() for v in (requested.split(",") if isinstance(requested, str) else requested) if v and v.strip()]
    if "all" in values:
        return ["all"]
    out = []
    for v in values:
        id = store.value("SELECT id FROM config_types WHERE id = ? OR name = ? ORDER BY id = ? DESC LIMIT 1", (v, v, v))
        if id and id not in out:
            out.append(id)
    return out


FLUSH_SHARES = 12   # the janitor runs every 5 s: a live session's activity reaches its row about once a minute


def expire(ctl: AuthController) -> int:
    """Delete sessions idle longer than the timeout (the janitor, every 5 s); returns how many.

    The cost follows the sessions that are due, not the sessions alive: a row whose stamp is
    past the timeout is deleted unless this process saw the session active since (the row then
    gets that stamp). Of the activity seen only in memory (SDK channels the embedded router
    keeps alive, requests between two writes of ``lookup``), one ``FLUSH_SHARES``-th is written
    back per 5 s of the clock, so ``lastActivityAt`` trails by about a minute. Writing every live
    session on every run held the API's loop 4 ms every 5 s at 1,000 connected SDKs and 30-39 ms
    at 10,000 (benchmarks/README.md)."""
    now = clock.now()
    cutoff = clock.fmt(now - dt.timedelta(seconds=ctl.settings.session_timeout)) or ""
    share = int(now.timestamp() // 5) % FLUSH_SHARES
    seen = list(ctl.activity.items())   # a copy: the router's thread adds to it meanwhile
    with ctl.store.write():
        back = [(last, t, last) for t, last in seen if last >= cutoff and hash(t) % FLUSH_SHARES == share]
        gone = []
        for row in ctl.store.all("SELECT id, token FROM api_sessions WHERE last_activity_at < ?", (cutoff,)):
            last = ctl.activity.get(row["token"], "")
            if last >= cutoff:
                back.append((last, row["token"], last))
            else:
                gone.append((row["id"],))
        ctl.store.executemany(
            "UPDATE api_sessions SET last_activity_at = ? WHERE token = ? AND last_activity_at < ?", back)
        ctl.store.executemany("DELETE FROM api_sessions WHERE id = ?", gone)
    for t, last in seen:
        if last < cutoff and ctl.activity.get(t, "") < cutoff:
            ctl.activity.pop(t, None)
    return len(gone)


def record_client_info(store, identity_id: str, env_info: str | None, sdk_info: str | None) -> None:
    """What a login says of the client (environment and SDK, JSON text): shown on its identity.
    Inside the caller's write transaction; a part not sent keeps its earlier value."""
    info = {k: v for k, v in (("env_info", env_info), ("sdk_info", sdk_info)) if v is not None}
    if info:
        store.execute(f"UPDATE identities SET {', '.join(f'{k} = ?' for k in info)} WHERE id = ?",  # noqa: S608
                      [*info.values(), identity_id])
