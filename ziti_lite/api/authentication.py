"""Logging in and the caller's own session and identity.

``POST /authenticate?method=...`` dispatches to a primary method registered in ``METHODS``
(password here; cert and ext-jwt register themselves from their own modules). A method returns
who authenticated; this module creates the API session and answers with its detail.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable
from typing import Annotated

import msgspec
from msgspec import Meta

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api.ops import BOTH, op
from ..auth import passwords, sessions
from ..auth.defaults import PRIMARY_DEFAULTS
from ..errors import CouldNotValidate, InvalidAuth
from ..resources.common import Body, name_of

S255 = Annotated[str, Meta(max_length=255)]
S253 = Annotated[str, Meta(max_length=253)]


class EnvInfo(Body, omit_defaults=True):
    arch: S255 | None = None
    os: S255 | None = None
    os_release: S255 | None = None
    os_version: S255 | None = None
    domain: S253 | None = None
    hostname: S253 | None = None


class SdkInfo(Body, omit_defaults=True):
    app_id: S255 | None = None
    app_version: S255 | None = None
    branch: S255 | None = None
    revision: S255 | None = None
    type: S255 | None = None
    version: S255 | None = None


class Authenticate(Body):
    username: Annotated[str, Meta(min_length=4, max_length=100)] | None = None
    password: Annotated[str, Meta(min_length=5, max_length=100)] | None = None
    config_types: list[str] | str | None = None
    env_info: EnvInfo | None = None
    sdk_info: SdkInfo | None = None


class Login(msgspec.Struct):
    """What a primary authentication method established."""
    identity_id: str
    authenticator_id: str
    cert_extendable: bool = False


Method = Callable[..., Awaitable[Login]]
METHODS: dict[str, Method] = {}


def method(name: str):
    def deco(fn):
        METHODS[name] = fn
        return fn
    return deco


_METHOD_KEYS = {"password": "updb", "updb": "updb", "cert": "cert", "ext-jwt": "extJwt", "extJwt": "extJwt"}


def primary_rules(policy: dict, method: str) -> dict:
    """The auth policy's primary rules for one method, defaults filled in."""
    key = _METHOD_KEYS[method]
    return {**PRIMARY_DEFAULTS[key], **((policy.get("primary") or {}).get(key) or {})}


def check_primary(policy: dict, method: str, *, signer_id: str | None = None, cert_expired: bool = False) -> None:
    """Raise ``InvalidAuth`` unless ``policy`` (as returned by ``identity_policy``) allows logging in
    with ``method`` ("password"/"updb", "cert", "ext-jwt"/"extJwt"). For cert logins pass whether
    the presented leaf is outside its validity period; for ext-jwt the signer's id."""
    rules = primary_rules(policy, method)
    if not rules.get("allowed"):
        raise InvalidAuth()
    key = _METHOD_KEYS[method]
    if key == "cert" and cert_expired and not rules.get("allowExpiredCerts"):
        raise InvalidAuth()
    if key == "extJwt" and rules.get("allowedSigners") and signer_id not in rules["allowedSigners"]:
        raise InvalidAuth()


def identity_policy(store, identity_id: str) -> tuple[dict, dict] | None:
    """The identity row and its auth policy (primary, secondary parsed), or None."""
    ident = store.one("SELECT * FROM identities WHERE id = ?", (identity_id,))
    if ident is None:
        return None
    pol = store.one("SELECT primary_, secondary FROM auth_policies WHERE id = ?", (ident["auth_policy_id"],))
    if pol is None:
        return None
    return ident, {"primary": json.loads(pol["primary_"]), "secondary": json.loads(pol["secondary"])}


def is_disabled(ident: dict) -> bool:
    return bool(ident["disabled_at"]) and (not ident["disabled_until"] or ident["disabled_until"] > clock.stamp())


@method("password")
async def password_login(ctx, body: Authenticate) -> Login:
    """Upstream's order: user, identity + policy, disabled, ``updb.allowed``, attempts, password.
    Every refusal is the same ``INVALID_AUTH`` after the same amount of hashing. Lockout counts
    consecutive wrong passwords (reset by a good one): the wrong password that takes the count
    past ``maxAttempts`` (0 = unlimited) disables the identity for ``lockoutDurationMinutes``
    (0 = until enabled) and ends its API sessions."""
    if not body.username or not body.password:
        raise CouldNotValidate("username", "username and password fields are required", None)
    store = ctx.store
    auth = store.one(
        "SELECT id, identity_id, password_hash, salt FROM authenticators WHERE method = 'updb' AND username = ?",
        (body.username,),
    )
    if auth is None:
        await passwords.verify_async(body.password, None, None, key=body.username)  # same cost as a wrong password
        raise InvalidAuth()
    found = identity_policy(store, auth["identity_id"])
    if found is None:
        raise InvalidAuth()
    ident, policy = found
    updb = primary_rules(policy, "updb")
    if is_disabled(ident) or not updb["allowed"]:
        await passwords.verify_async(body.password, None, None, key=body.username)
        raise InvalidAuth()
    ok = await passwords.verify_async(body.password, auth["password_hash"], auth["salt"], key=body.username)
    max_attempts = max(0, updb.get("maxAttempts") or 0)
    with store.write():
        # re-read: a concurrent login may have counted or locked meanwhile
        ident = store.one("SELECT * FROM identities WHERE id = ?", (ident["id"],)) or ident
        if is_disabled(ident):
            ok = False
        elif ok:
            if ident["failed_logins"]:
                store.execute("UPDATE identities SET failed_logins = 0 WHERE id = ?", (ident["id"],))
        else:
            failures = ident["failed_logins"] + 1
            store.execute("UPDATE identities SET failed_logins = ? WHERE id = ?", (failures, ident["id"]))
            if max_attempts and failures > max_attempts:
                minutes = updb.get("lockoutDurationMinutes") or 0
                now = clock.now()
                until = clock.fmt(now + dt.timedelta(minutes=minutes)) if minutes > 0 else None
                store.execute(
                    "UPDATE identities SET disabled_at = ?, disabled_until = ?, failed_logins = 0 WHERE id = ?",
                    (clock.fmt(now), until, ident["id"]),
                )
                store.execute("DELETE FROM api_sessions WHERE identity_id = ?", (ident["id"],))
    if not ok:
        raise InvalidAuth()
    return Login(ident["id"], auth["id"])


def resolve_config_types(store, requested) -> list[str]:
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


# hooks that fill a session's authQueries (MFA, ext-jwt secondary); each returns a list
AUTH_QUERY_PROVIDERS: list[Callable] = []


def auth_queries(ctx, row: dict) -> list:
    out: list = []
    for provider in AUTH_QUERY_PROVIDERS:
        out.extend(provider(ctx, row))
    return out


def session_detail(ctx, row: dict, current: bool = True) -> dict:
    store = ctx.store
    timeout = ctx.ctl.settings.session_timeout
    cached = max(row["last_activity_at"], ctx.ctl.activity.get(row["token"], ""))
    out = {
        **env.base(row, "api-sessions", ("sessions",)),
        "token": row["token"],
        "identityId": row["identity_id"],
        "identity": env.entity_ref(
            "identities", "identities", row["identity_id"], name_of(store, "identities", row["identity_id"])
        ),
        "ipAddress": row["ip_address"],
        "configTypes": msgspec.Raw(row["config_types"]),
        "authQueries": auth_queries(ctx, row) if current else [],
        "isMfaRequired": bool(row["is_mfa_required"]),
        "isMfaComplete": bool(row["is_mfa_complete"]),
        "authenticatorId": row["authenticator_id"],
        "isCertExtendable": bool(row["is_cert_extendable"]),
        "lastActivityAt": row["last_activity_at"],
        "cachedLastActivityAt": cached,
    }
    if current:
        out["expiresAt"] = clock.fmt(clock.parse(cached) + dt.timedelta(seconds=timeout))
        out["expirationSeconds"] = timeout
    return out


@op(
    "POST",
    "/authenticate",
    apis=BOTH,
    auth="public",
    op_id="authenticate",
    body=Authenticate,
    tag="authentication",
    query=("method",),
)
async def authenticate(ctx):
    name = ctx.q("method")
    fn = METHODS.get(name or "")
    if fn is None:
        raise CouldNotValidate("method", "method in query should be one of [password cert ext-jwt]", name)
    body = await ctx.json(Authenticate)
    login = await fn(ctx, body)
    store = ctx.store
    config_types = resolve_config_types(store, body.config_types)
    mfa_required = (
        store.value("SELECT 1 FROM mfa WHERE identity_id = ? AND is_verified = 1", (login.identity_id,)) is not None
    )
    created = sessions.create(
        ctx.ctl,
        login.identity_id,
        login.authenticator_id,
        ctx.client_ip,
        config_types,
        mfa_required=mfa_required,
        cert_extendable=login.cert_extendable,
    )
    info = {}
    if body.env_info is not None:
        info["env_info"] = msgspec.json.encode(body.env_info).decode()
    if body.sdk_info is not None:
        info["sdk_info"] = msgspec.json.encode(body.sdk_info).decode()
    if info:
        with store.write():
            store.execute(
                f"UPDATE identities SET {', '.join(f'{k} = ?' for k in info)} WHERE id = ?",
                [*info.values(), login.identity_id],
            )
    row = store.one("SELECT * FROM api_sessions WHERE id = ?", (created["id"],))
    return env.ok(session_detail(ctx, row), headers={"zt-session": row["token"]})


@op("GET", "/current-api-session", apis=BOTH, auth="partial", op_id="getCurrentAPISession", tag="current-api-session")
async def current_api_session(ctx):
    row = ctx.store.one("SELECT * FROM api_sessions WHERE id = ?", (ctx.session.id,))
    return env.ok(session_detail(ctx, row))


@op(
    "DELETE",
    "/current-api-session",
    apis=BOTH,
    auth="partial",
    op_id="deleteCurrentApiSession",
    tag="current-api-session",
)
async def logout(ctx):
    with ctx.store.write():
        ctx.store.execute("DELETE FROM api_sessions WHERE id = ?", (ctx.session.id,))
    ctx.ctl.activity.pop(ctx.session.token, None)
    return env.empty()


@op("GET", "/current-identity", apis=BOTH, auth="session", op_id="getCurrentIdentity", tag="current-identity")
async def current_identity(ctx):
    from ..resources.identities import IDENTITIES

    row = crud.get_row(ctx.store, IDENTITIES, ctx.identity_id)
    out = crud.render(ctx, IDENTITIES, row)
    out["_links"] = {"self": {"href": "./current-identity"}, "mfa": {"href": "./current-identity/mfa"}}
    return env.ok(out)
