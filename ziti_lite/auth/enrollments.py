"""Creating enrollments: a one-time token and the JWT that carries it, for an identity (``ott``,
``ottca``, ``updb``), a router (``erott``/``trott``) or a re-enrolled authenticator; and the
network and CA JWTs. Resources call this when they create what will enroll; completing an
enrollment is ``enroll/complete.py``.
"""

from __future__ import annotations

import datetime as dt

from .. import clock
from ..api.context import Ctx
from ..errors import ApiError, field_cause
from ..ids import new_id, new_token
from ..pki import ca, tokens
from . import certs as certauth
from .certs import server_keypair


def network_jwt(ctl) -> str:
    return tokens.network_jwt(server=server_keypair(ctl), issuer=ctl.settings.base_url)


def ca_jwt(ctl, ca_id: str) -> str:
    return tokens.ca_enrollment_jwt(server=server_keypair(ctl), issuer=ctl.settings.base_url, ca_id=ca_id)


def new_enrollment(ctx: Ctx, method: str, *, identity_id: str | None = None, edge_router_id: str | None = None,
                   transit_router_id: str | None = None, ca_id: str | None = None, username: str | None = None,
                   expires_at: dt.datetime | None = None) -> str:
    """Insert an enrollment with a fresh token and its signed JWT; returns its id."""
    ctl = ctx.ctl
    expires = expires_at or clock.now() + dt.timedelta(minutes=ctl.settings.enrollment_minutes)
    token = new_token()
    subject = identity_id or edge_router_id or transit_router_id
    if subject is None:
        raise ValueError("an enrollment is for an identity or a router")
    # routers are told where the control channel listens (as upstream tells them its cluster's peers)
    ctrl = ctl.ctrl_server
    ctrls = [ctrl.address] if ctrl is not None and (edge_router_id or transit_router_id) else None
    jwt = tokens.enrollment_jwt(server=server_keypair(ctl), issuer=ctl.settings.base_url, subject=subject,
                                token=token, method=method, expires_at=expires, ctrls=ctrls)
    id = new_id()
    now = clock.stamp()
    ctx.store.execute(
        "INSERT INTO enrollments (id, created_at, updated_at, method, identity_id, edge_router_id, transit_router_id,"
        " token, jwt, expires_at, ca_id, username) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (id, now, now, method, identity_id, edge_router_id, transit_router_id, token, jwt, clock.fmt(expires),
         ca_id, username))
    return id


def create_for_identity(ctx: Ctx, identity_id: str, spec: dict) -> str | None:
    """The ``enrollment`` object of an identity create: first of ott, ottca, updb wins."""
    if spec.get("ott"):
        return new_enrollment(ctx, "ott", identity_id=identity_id)
    if spec.get("ottca"):
        ca_id = spec["ottca"]
        if not certauth.ca_rows(ctx.store, "id = ?", (ca_id,)):
            raise ApiError("NOT_FOUND", cause=field_cause("caId", f"ca with id {ca_id} not found", ca_id))
        return new_enrollment(ctx, "ottca", identity_id=identity_id, ca_id=ca_id)
    if spec.get("updb"):
        return new_enrollment(ctx, "updb", identity_id=identity_id, username=spec["updb"])
    return None


def reenroll_authenticator(ctx: Ctx, auth: dict, expires: dt.datetime) -> str:
    """Replace an authenticator by an enrollment that recreates it: updb → updb (same username),
    cert from a CA → ottca, other cert → ott. Returns the enrollment id (inside a write tx)."""
    store = ctx.store
    identity_id = auth["identity_id"]
    if auth["method"] == "updb":
        method, kw = "updb", {"username": auth["username"]}
    else:
        ca_id = auth.get("ca_id")
        if ca_id is None and auth.get("cert_pem") and not auth.get("is_issued_by_network"):
            try:
                certs = ca.load_certs(auth["cert_pem"])
            except ValueError:
                certs = []
            row = certauth.first_ca(store, certs, "1", check_time=False, eku=None) if certs else None
            ca_id = row["id"] if row else None
        method, kw = ("ottca", {"ca_id": ca_id}) if ca_id else ("ott", {})
    store.execute("DELETE FROM enrollments WHERE identity_id = ? AND method = ?", (identity_id, method))
    store.execute("DELETE FROM api_sessions WHERE authenticator_id = ?", (auth["id"],))
    store.execute("DELETE FROM authenticators WHERE id = ?", (auth["id"],))
    return new_enrollment(ctx, method, identity_id=identity_id, expires_at=expires, **kw)
