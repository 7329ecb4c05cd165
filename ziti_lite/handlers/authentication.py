"""Logging in and the caller's own session and identity.

``POST /authenticate?method=...`` dispatches to a primary method registered in ``auth.methods.METHODS``
(password here; cert and ext-jwt register themselves from their own modules). A method returns
who authenticated; this module creates the API session and answers with its detail.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import msgspec
from msgspec import Meta

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api import render as rendering
from ..api.context import Ctx
from ..api.ops import BOTH, op
from ..auth import oidc_tokens, passwords, sessions
from ..auth.methods import METHODS, Login, auth_queries, login_outcome, method
from ..auth.policy import identity_policy, is_disabled, primary_rules
from ..errors import ApiError, CouldNotValidate, InvalidAuth, Unauthorized, generic_cause
from ..resources.common import Body
from ..resources.identities import IDENTITIES

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


@method("password", rank=1)
async def password_login(ctx: Ctx, body: Authenticate) -> Login:
    """Upstream's order: user, identity + policy, disabled, ``updb.allowed``, attempts, password.
    Every refusal is the same ``INVALID_AUTH`` after the same amount of hashing. Lockout counts
    consecutive wrong passwords (reset by a good one): the wrong password that takes the count
    past ``maxAttempts`` (0 = unlimited) disables the identity for ``lockoutDurationMinutes``
    (0 = until enabled) and ends its API sessions."""
    if not body.username or not body.password:
        # upstream's updb module: a COULD_NOT_VALIDATE whose cause is a plain error, not a field
        raise ApiError("COULD_NOT_VALIDATE", cause=generic_cause("username and password fields are required"))
    store = ctx.store
    auth = store.one(
        "SELECT id, identity_id, password_hash, salt FROM authenticators WHERE method = 'updb' AND username = ?",
        (body.username,),
    )
    if auth is None:
        # the same cost as a wrong password, in the lane of logins that cannot succeed
        await passwords.verify_async(body.password, None, None, key=body.username, trusted=False)
        raise InvalidAuth()
    found = identity_policy(store, auth["identity_id"])
    if found is None:
        raise InvalidAuth()
    ident, policy = found
    updb = primary_rules(policy, "updb")
    if is_disabled(ident) or not updb["allowed"]:
        await passwords.verify_async(body.password, None, None, key=body.username, trusted=False)
        raise InvalidAuth()
    # an account whose last password check failed waits in the untrusted lane until one succeeds
    ok = await passwords.verify_async(body.password, auth["password_hash"], auth["salt"], key=body.username,
                                      trusted=not ident["failed_logins"])
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
                # disabled: its tokens so far are revoked, as any disabling does (resources/revocations.py)
                oidc_tokens.put_revocation(ctx.ctl, ident["id"], oidc_tokens.REVOKE_IDENTITY)
    if not ok:
        raise InvalidAuth()
    return Login(ident["id"], auth["id"])


def _identity_ref(store, id: str) -> dict | None:
    ident = store.one("SELECT name, auth_policy_id FROM identities WHERE id = ?", (id,))
    return env.entity_ref("identities", "identities", id, ident and ident["name"], ident)


def session_detail(ctx: Ctx, row: dict, current: bool = True) -> dict:
    store = ctx.store
    timeout = ctx.ctl.settings.session_timeout
    cached = max(row["last_activity_at"], ctx.ctl.activity.get(row["token"], ""))
    out = {
        **env.base(row, "api-sessions", ("sessions",)),
        "token": row["token"],
        "identityId": row["identity_id"],
        "identity": _identity_ref(store, row["identity_id"]),
        "ipAddress": row["ip_address"],
        "configTypes": msgspec.Raw(row["config_types"]),
        "authQueries": auth_queries(ctx, row) if current else [],
        "isMfaRequired": bool(row["is_mfa_required"]),
        "isMfaComplete": bool(row["is_mfa_complete"]),
        "authenticatorId": row["authenticator_id"],
        "isCertExtendable": bool(row["is_cert_extendable"]),
        "lastActivityAt": row["last_activity_at"],
        "cachedLastActivityAt": cached,
        **sessions.cert_flags(store, row),
    }
    if current:
        out["expiresAt"] = clock.fmt(clock.parse(cached) + dt.timedelta(seconds=timeout))
        out["expirationSeconds"] = timeout
        session = ctx.session
        claims = ctx.ctl.oidc_verified.get(session.bearer) if session is not None and session.bearer else None
        if claims is not None:
            # named by an OIDC access token: upstream shows the token, "oidc" and the token's own expiry
            assert session is not None and session.bearer is not None
            out["token"] = session.bearer
            out["authenticatorId"] = "oidc"
            out["expiresAt"] = clock.fmt(dt.datetime.fromtimestamp(claims["exp"], dt.UTC))
            out["expirationSeconds"] = max(0, claims["exp"] - int(clock.now().timestamp()))
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
async def authenticate(ctx: Ctx):
    # upstream binds the body before the method, and reports the body's error first
    body = await ctx.json(Authenticate)
    name = ctx.q("method")
    fn = METHODS.get(name or "")
    if fn is None:
        if not name:   # go-openapi's required parameter: its raw values, [] when the key is absent
            raise CouldNotValidate("method", "method in query is required", "" if name == "" else [])
        # the registered methods in rank order: upstream's [password cert ext-jwt]
        raise CouldNotValidate("method", f"method in query should be one of [{' '.join(METHODS)}]", name)
    try:
        login = await fn(ctx, body)
    except ApiError as e:
        login_outcome(ctx, name or "", None, None, e, body.username)
        raise
    store = ctx.store
    config_types = sessions.resolve_config_types(store, body.config_types)
    mfa_required = (
        store.value("SELECT 1 FROM mfa WHERE identity_id = ? AND is_verified = 1", (login.identity_id,)) is not None
    )
    with store.write():   # the API session, the identity's env/SDK info and the login's audit row: one commit
        created = sessions.create(
            ctx.ctl,
            login.identity_id,
            login.authenticator_id,
            ctx.client_ip,
            config_types,
            mfa_required=mfa_required,
            cert_extendable=login.cert_extendable,
            improper_chain=login.improper_chain,
        )
        sessions.record_client_info(
            store, login.identity_id,
            None if body.env_info is None else msgspec.json.encode(body.env_info).decode(),
            None if body.sdk_info is None else msgspec.json.encode(body.sdk_info).decode())
        login_outcome(ctx, name or "", login, created["id"], None, body.username)
    row = store.one("SELECT * FROM api_sessions WHERE id = ?", (created["id"],))
    if row is None:  # ended (deleted) before it could be shown
        raise Unauthorized()
    detail = session_detail(ctx, row)
    answer = env.ok(detail, headers={"zt-session": row["token"]})
    # upstream names both requests with the same header (its two constants share one value)
    for flag in ("isCertExtendRequested", "isCertKeyRollRequested"):
        if detail.get(flag):
            answer.raw_headers.append((b"ziti-authenticator-extend-requested", b"true"))
    return answer


@op("GET", "/current-api-session", apis=BOTH, auth="partial", op_id="getCurrentAPISession", tag="current-api-session")
async def current_api_session(ctx: Ctx):
    row = ctx.store.one("SELECT * FROM api_sessions WHERE id = ?", (ctx.api_session.id,))
    if row is None:  # ended (logout elsewhere) since the session was looked up
        raise Unauthorized()
    return env.ok(session_detail(ctx, row))


@op(
    "DELETE",
    "/current-api-session",
    apis=BOTH,
    auth="partial",
    op_id="deleteCurrentApiSession",
    tag="current-api-session",
)
async def logout(ctx: Ctx):
    with ctx.store.write():
        ctx.store.execute("DELETE FROM api_sessions WHERE id = ?", (ctx.api_session.id,))
        bearer = ctx.api_session.bearer
        claims = ctx.ctl.oidc_verified.get(bearer) if bearer else None
        if claims is not None:   # the row is gone (every token of the session with it); the list names this one
            oidc_tokens.revoke(ctx.store, claims["jti"], claims["exp"])
    ctx.ctl.activity.pop(ctx.api_session.token, None)
    return env.empty()


@op("GET", "/current-identity", apis=BOTH, auth="session", op_id="getCurrentIdentity", tag="current-identity")
async def current_identity(ctx: Ctx):
    row = crud.get_row(ctx.store, IDENTITIES, ctx.identity_id)
    out = rendering.render(ctx, IDENTITIES, row)
    out["_links"] = {"self": {"href": "./current-identity"}, "mfa": {"href": "./current-identity/mfa"}}
    return env.ok_without_meta(out)
