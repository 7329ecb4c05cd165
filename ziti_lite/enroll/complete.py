"""Completing enrollments (``POST /enroll...``) and extending a router's certificates.
The kinds of enrollment and their lifecycle are described in ``enroll/__init__.py``.
"""

from __future__ import annotations

import json
from typing import Any

from .. import clock
from ..api import crud
from ..api.context import Ctx
from ..auth import certs as certauth
from ..auth import passwords
from ..auth.certs import signer_keypair
from ..auth.policy import identity_policy
from ..errors import ApiError, CouldNotValidate, Unauthorized, generic_cause
from ..ids import new_id
from ..pki import ca, claims
from ..pki.csr import CsrError, parse_csr
from ..resources.identities import AUTHENTICATORS, IDENTITIES
from ..resources.routers import EDGE_ROUTERS, ROUTERS


def find(store, token: str | None) -> dict:
    """The enrollment of ``token`` (expiry is checked by each flow, after its own checks)."""
    row = store.one("SELECT * FROM enrollments WHERE token = ?", (token,)) if token else None
    if row is None:
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    return row


def _check_live(store, enr: dict, owner: str) -> None:
    if not enr[owner] or (owner == "identity_id" and not store.value(
            "SELECT 1 FROM identities WHERE id = ?", (enr["identity_id"],))):
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    if enr["expires_at"] <= clock.stamp():
        raise ApiError("ENROLLMENT_EXPIRED")


def _consume(store, enr: dict) -> None:
    """Delete the enrollment; fails when another request consumed it first."""
    if not store.value("SELECT 1 FROM enrollments WHERE id = ?", (enr["id"],)):
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    store.execute("DELETE FROM enrollments WHERE id = ?", (enr["id"],))


def _add_authenticator(ctx: Ctx, values: dict) -> str:
    store = ctx.store
    if store.value("SELECT 1 FROM authenticators WHERE identity_id = ? AND method = ?",
                   (values["identity_id"], values["method"])):
        raise ApiError("MAX_AUTHENTICATOR_METHODS_REACHED")
    id = crud.insert(store, AUTHENTICATORS, values)
    crud.changed(ctx, AUTHENTICATORS, id, None, values)
    return id


def _csr(data: bytes | str):
    if not data or (isinstance(data, (bytes, str)) and not data.strip()):
        raise ApiError("COULD_NOT_PROCESS_CSR")
    try:
        return parse_csr(data)
    except CsrError as e:
        raise ApiError("COULD_NOT_PROCESS_CSR", cause=generic_cause(str(e))) from None


def enroll_ott(ctx: Ctx, enr: dict, body: bytes, is_json: bool) -> str:
    """Sign the CSR in ``body``; the identity gets a network-issued cert authenticator.
    Returns the issued leaf PEM."""
    store = ctx.store
    _check_live(store, enr, "identity_id")
    if is_json:
        raise ApiError("COULD_NOT_PROCESS_CSR", cause=generic_cause("expected a PEM CSR, got JSON"))
    csr = _csr(body)
    leaf = ca.sign_csr(csr, signer_keypair(ctx.ctl), usage="client")
    with store.write():
        _consume(store, enr)
        _add_authenticator(ctx, {"identity_id": enr["identity_id"], "method": "cert", "cert_pem": leaf,
                                 "fingerprint": ca.fingerprint(leaf), "is_issued_by_network": True})
    return leaf


def enroll_updb(ctx: Ctx, enr: dict, doc: dict) -> None:
    """Set the password of the enrollment's username (the body's username is ignored)."""
    store = ctx.store
    _check_live(store, enr, "identity_id")
    password = doc.get("password") if isinstance(doc, dict) else None
    if not isinstance(password, str) or not password:
        raise CouldNotValidate("password", "password is required", None)
    found = identity_policy(store, enr["identity_id"])
    minimum = max(5, int(((found[1]["primary"].get("updb") or {}).get("minPasswordLength") or 5) if found else 5))
    if not minimum <= len(password) <= 100:
        raise CouldNotValidate("password", f"password must be between {minimum} and 100 characters", "<redacted>")
    username = enr["username"] or ""
    if not username:
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    hashed, salt = passwords.hash_password(password)
    with store.write():
        _consume(store, enr)
        if store.value("SELECT 1 FROM authenticators WHERE username = ?", (username,)):
            raise CouldNotValidate("username", f"duplicate value '{username}' in unique index on authenticators store",
                                   username)
        _add_authenticator(ctx, {"identity_id": enr["identity_id"], "method": "updb", "username": username,
                                 "password_hash": hashed, "salt": salt})


def _cert_not_in_use(store, fp: str) -> None:
    if store.value("SELECT 1 FROM authenticators WHERE fingerprint = ? OR unverified_fingerprint = ?", (fp, fp)):
        raise ApiError("CERT_IN_USE", cause={"fingerprint": fp})


def enroll_ottca(ctx: Ctx, enr: dict, certs: list) -> None:
    """Bind the presented certificate (issued through the enrollment's CA) to the identity."""
    store = ctx.store
    _check_live(store, enr, "identity_id")
    rows = certauth.ca_rows(store, "id = ?", (enr["ca_id"],)) if enr["ca_id"] else []
    if not rows:
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    row = rows[0]
    if not row["is_ott_ca_enrollment_enabled"] or not row["is_verified"]:
        raise ApiError("ENROLLMENT_CA_NOT_VALID")
    try:
        anchors = ca.load_certs(row["cert_pem"])
        path = ca.verified_path(certs[0], certs[1:], anchors, eku="client") if certs else None
    except (ca.ChainError, ValueError):
        path = None
    if not path:
        raise ApiError("CERT_FAILED_VALIDATION")
    fp = certauth.fingerprint(certs[0])
    _cert_not_in_use(store, fp)
    with store.write():
        _consume(store, enr)
        _add_authenticator(ctx, {"identity_id": enr["identity_id"], "method": "cert", "fingerprint": fp,
                                 "cert_pem": ca.chain_pem(*path), "is_issued_by_network": False,
                                 "ca_id": row["id"]})


def _identity_name(store, row: dict, leaf, requested: str, identity_id: str) -> str:
    cn = ca.cert_info(leaf)["cn"] or ""
    name = row["identity_name_format"] or "[caName]-[commonName]"
    for symbol, value in (("[caName]", row["name"]), ("[caId]", row["id"]), ("[commonName]", cn),
                          ("[requestedName]", requested or identity_id), ("[identityId]", identity_id)):
        name = name.replace(symbol, value)
    count = 0
    while store.value("SELECT 1 FROM identities WHERE name = ?", (name,)):
        count += 1
        name += f"{count:06d}"  # cumulative, as upstream
    return name


def enroll_ca(ctx: Ctx, certs: list, requested: str) -> str:
    """Auto CA enrollment: a certificate from a verified CA with auto enrollment on creates a
    new identity. Returns its id."""
    store = ctx.store
    if not certauth.ca_rows(store):
        raise ApiError("ENROLLMENT_NO_VALID_CAS")
    if not certs:
        raise ApiError("CERT_FAILED_VALIDATION")
    row = certauth.first_ca(store, certs, "is_auto_ca_enrollment_enabled = 1 AND is_verified = 1",
                            check_time=True, eku="client")
    if row is None:
        raise ApiError("CERT_FAILED_VALIDATION")
    leaf = certs[0]
    try:
        external_id = claims.external_id(certauth.claim_of(row), leaf)
    except claims.ClaimError as e:
        raise ApiError("MISSING_CERT_CLAIM", cause=generic_cause(str(e))) from None
    fp = certauth.fingerprint(leaf)
    if not external_id:
        _cert_not_in_use(store, fp)
    elif store.value("SELECT 1 FROM identities WHERE external_id = ?", (external_id,)):
        raise ApiError("CERT_IN_USE", cause={"externalId": external_id})
    identity_id = new_id()
    roles = [r[1:] if r.startswith("#") else r for r in json.loads(row["identity_roles"] or "[]")]
    with store.write():
        values: dict[str, Any] = {
            "name": _identity_name(store, row, leaf, requested, identity_id), "type": "Default",
            "is_admin": False, "role_attributes": [r for r in roles if r and not r.startswith("@")],
            "auth_policy_id": None, "external_id": external_id or None, "tags": {},
        }
        if IDENTITIES.prepare is not None:
            IDENTITIES.prepare(ctx, values, None)
        crud.insert(store, IDENTITIES, values, identity_id)
        crud.changed(ctx, IDENTITIES, identity_id, None, values)
        if not external_id:
            _add_authenticator(ctx, {"identity_id": identity_id, "method": "cert", "fingerprint": fp,
                                     "cert_pem": certauth.pem_of(leaf), "is_issued_by_network": False,
                                     "ca_id": row["id"]})
    return identity_id


# ================================================================ routers
ROUTER_OWNER = {"erott": "edge_router_id", "trott": "transit_router_id"}


def _router_certs(ctx: Ctx, router_id: str, doc: dict) -> tuple[str, str]:
    """Sign a router's client and server CSRs; returns (client leaf, server leaf)."""
    client_csr = doc.get("certCsr") or doc.get("clientCsr")
    server_csr = doc.get("serverCertCsr") or doc.get("serverCsr")
    if not isinstance(server_csr, str) or not server_csr.strip():
        raise ApiError("MISSING_OR_INVALID_CSR", cause=generic_cause("invalid server CSR"))
    if not isinstance(client_csr, str) or not client_csr.strip():
        raise ApiError("MISSING_OR_INVALID_CSR", cause=generic_cause("invalid client CSR"))
    server = _csr(server_csr)
    client = _csr(client_csr)
    if client.common_name != router_id:
        raise ApiError("EDGE_ROUTER_ENROLL_COMMON_NAME_INVALID")
    signer = signer_keypair(ctx.ctl)
    server_leaf = ca.sign_csr(server, signer, usage="server")
    client_leaf = ca.sign_csr(client, signer, usage="client", copy_sans=True)
    return client_leaf, server_leaf


def _set_router_cert(ctx: Ctx, router_id: str, client_chain: str, client_leaf: str) -> None:
    before = ctx.store.one("SELECT * FROM routers WHERE id = ?", (router_id,))
    if before is None:  # deleted since the enrollment was found
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    res = EDGE_ROUTERS if before["is_edge"] else ROUTERS
    values = {"fingerprint": ca.fingerprint(client_leaf), "cert_pem": client_chain, "is_verified": True,
              "unverified_fingerprint": None, "unverified_cert_pem": None}
    crud.write_row(ctx.store, res, router_id, values)
    crud.changed(ctx, res, router_id, before, values)


def enroll_router(ctx: Ctx, enr: dict, doc: dict) -> dict:
    """``erott``/``trott``: the router's client and server certificates, and the CA bundle."""
    store = ctx.store
    owner = ROUTER_OWNER[enr["method"]]
    router_id = enr[owner]
    if not router_id or not store.value("SELECT 1 FROM routers WHERE id = ?", (router_id,)):
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    if enr["expires_at"] <= clock.stamp():
        raise ApiError("ENROLLMENT_EXPIRED")
    client_leaf, server_leaf = _router_certs(ctx, router_id, doc if isinstance(doc, dict) else {})
    client_chain = certauth.chain_pem(ctx.ctl, client_leaf)
    with store.write():
        _consume(store, enr)
        _set_router_cert(ctx, router_id, client_chain, client_leaf)
    return {"ca": certauth.ca_bundle_pem(ctx.ctl), "cert": client_chain,
            "serverCert": certauth.chain_pem(ctx.ctl, server_leaf)}


def extend_router(ctx: Ctx, certs: list, doc: dict) -> dict:
    """``/enroll/extend/router``: a router presenting its current client certificate gets new
    client and server certificates; the new client certificate replaces the old one."""
    store = ctx.store
    leaf = next((c for c in reversed(certs) if not ca.is_ca(c)), None)
    if leaf is None:
        raise Unauthorized()
    router_id = store.value("SELECT id FROM routers WHERE fingerprint = ?", (certauth.fingerprint(leaf),))
    if router_id is None:
        raise Unauthorized()
    doc = doc if isinstance(doc, dict) else {}
    for key, reason in (("certCsr", "client CSR is required"), ("serverCertCsr", "server CSR is required")):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            raise CouldNotValidate(key, reason, doc.get(key))
    client_leaf, server_leaf = _router_certs(ctx, router_id, doc)
    client_chain = certauth.chain_pem(ctx.ctl, client_leaf)
    with store.write():
        _set_router_cert(ctx, router_id, client_chain, client_leaf)
    return {"cert": client_chain, "serverCert": certauth.chain_pem(ctx.ctl, server_leaf)}
