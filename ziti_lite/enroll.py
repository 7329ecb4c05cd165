"""Enrollments: creating them (with their JWTs) and the controller's signing material.

The client-API enroll endpoints and the other enrollment flows build on these functions.
"""

from __future__ import annotations

import datetime as dt

from . import clock
from .errors import ApiError, NotFound
from .ids import new_id, new_token
from .pki import ca, tokens


def server_keypair(ctl) -> ca.KeyPair:
    return ca.KeyPair(ctl.state["server_cert"], ctl.state["server_key"])


def signer_keypair(ctl) -> ca.KeyPair:
    return ca.KeyPair(ctl.state["signer_cert"], ctl.state["signer_key"])


def network_jwt(ctl) -> str:
    return tokens.network_jwt(server=server_keypair(ctl), issuer=ctl.settings.base_url)


def new_enrollment(ctx, method: str, *, identity_id: str | None = None, edge_router_id: str | None = None,
                   transit_router_id: str | None = None, ca_id: str | None = None, username: str | None = None,
                   expires_at: dt.datetime | None = None) -> str:
    """Insert an enrollment with a fresh token and its signed JWT; returns its id."""
    ctl = ctx.ctl
    expires = expires_at or clock.now() + dt.timedelta(minutes=ctl.settings.enrollment_minutes)
    token = new_token()
    subject = identity_id or edge_router_id or transit_router_id
    jwt = tokens.enrollment_jwt(server=server_keypair(ctl), issuer=ctl.settings.base_url, subject=subject,
                                token=token, method=method, expires_at=expires)
    id = new_id()
    now = clock.stamp()
    ctx.store.execute(
        "INSERT INTO enrollments (id, created_at, updated_at, method, identity_id, edge_router_id, transit_router_id,"
        " token, jwt, expires_at, ca_id, username) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (id, now, now, method, identity_id, edge_router_id, transit_router_id, token, jwt, clock.fmt(expires),
         ca_id, username))
    return id


def create_for_identity(ctx, identity_id: str, spec: dict) -> str | None:
    """The ``enrollment`` object of an identity create: first of ott, ottca, updb wins."""
    if spec.get("ott"):
        return new_enrollment(ctx, "ott", identity_id=identity_id)
    if spec.get("ottca"):
        ca_id = spec["ottca"]
        if not ctx.store.value("SELECT 1 FROM sqlite_master WHERE name = 'cas'") or \
                not ctx.store.value("SELECT 1 FROM cas WHERE id = ?", (ca_id,)):
            raise NotFound("ca", ca_id)
        return new_enrollment(ctx, "ottca", identity_id=identity_id, ca_id=ca_id)
    if spec.get("updb"):
        return new_enrollment(ctx, "updb", identity_id=identity_id, username=spec["updb"])
    return None


def prepare_cert_authenticator(ctx, values: dict) -> None:
    """Admin-created cert authenticator: one PEM certificate that chains to a trusted CA."""
    pem = values.pop("cert_pem", None) or ""
    try:
        certs = ca.load_certs(pem)
    except Exception:
        certs = []
    if len(certs) != 1:
        raise ApiError("COULD_NOT_PARSE_PEM_BLOCK", 400, message="could not parse the certificate PEM")
    cert_pem = ca.chain_pem(certs[0])
    values["cert_pem"] = cert_pem
    values["fingerprint"] = ca.fingerprint(cert_pem)
    values["is_issued_by_network"] = False
    values.pop("username", None)
    values.pop("password", None)
