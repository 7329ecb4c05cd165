"""Enrollment from an identity provider: ``POST /enroll/token`` (OpenZiti 2.0).

Why a module of its own: unlike every other enrollment it redeems no enrollment row. The
credential is a JWT of an external JWT signer (``Authorization: Bearer``), and the identity does
not exist yet: it is made here, named by the signer's ``enrollNameClaimsSelector``, given role
attributes by its ``enrollAttributeClaimsSelector``, the ``externalId`` its ``claimsProperty``
picks and the signer's ``enrollAuthPolicyId``. With a CSR (``{"clientCsr": PEM}``) the identity
gets a network-issued certificate (the signer must allow ``enrollToCertEnabled``); without one it
is left to log in with such JWTs (``enrollToTokenEnabled``).

The token is verified as an ext-jwt login verifies it (``auth/extjwt.py``: kid, algorithm,
signature, expiry, issuer, audience; the signer picked by ``iss``, or by the
``ziti-token-issuer-id`` header). The refusals, in upstream v2.0.3's order: a token that does
not verify (or names no name or id) is 400 INVALID_ENROLLMENT_TOKEN; an identity already
holding that externalId 409 ENROLLMENT_IDENTITY_ALREADY_ENROLLED; a mode the signer or its auth
policy does not allow 409 INVALID_ENROLLMENT_NOT_ALLOWED; a CSR that does not parse 400
COULD_NOT_PROCESS_CSR; a name already taken 400 COULD_NOT_VALIDATE naming ``name`` (upstream
answers 500 there).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..api import crud
from ..api.context import Ctx
from ..auth import certs as certauth
from ..auth import extjwt
from ..auth.certs import signer_keypair
from ..errors import ApiError
from ..pki import ca
from ..resources.auth import DEFAULT_AUTH_POLICY, load_json, normalized_policy
from ..resources.identities import IDENTITIES
from .complete import _add_authenticator, _csr

log = logging.getLogger("ziti_lite.enroll.token")

ISSUER_ID_HEADER = "ziti-token-issuer-id"


@dataclass
class Claimed:
    """A verified token: its signer and what its claims give the new identity."""
    signer: dict
    external_id: str
    name: str
    attributes: list[str]


def attributes_at(claims: dict, selector: str) -> list[str]:
    """Role attributes from the claims: nothing for no selector, a selector that picks nothing
    or a null; one for a string; the non-empty strings of a list. Anything else is refused."""
    if not selector:
        return []
    try:
        value = extjwt.claim_at(claims, selector)
    except KeyError:
        return []
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise extjwt.Rejected(f"the attribute claim {selector!r} is not a string or a list of strings")


def _name_at(claims: dict, selector: str) -> str:
    try:
        value = extjwt.claim_at(claims, selector)
    except KeyError:
        raise extjwt.Rejected(f"the name claim {selector!r} is missing") from None
    if not isinstance(value, str):
        raise extjwt.Rejected(f"the name claim {selector!r} is not a string")
    return value


async def _verify_one(ctx: Ctx, token: str, signer: dict | None) -> Claimed:
    header, claims = extjwt.unverified(token)
    if signer is None:
        signer = extjwt.signer_for_issuer(ctx.store, claims["iss"])
        if signer is None:
            raise extjwt.Rejected(f"no enabled signer for issuer {claims['iss']!r}")
    key = await extjwt.key_for(ctx.ctl, signer, header["kid"])
    claims = extjwt.verify(token, header, key, signer)
    external_id = extjwt.claimed_id(signer, claims)
    if external_id is None:
        raise extjwt.Rejected("no identity id in the claims")
    name = _name_at(claims, signer["enroll_name_claims_selector"] or "/sub")
    if not name:
        raise extjwt.Rejected("the name claim is empty")
    return Claimed(signer, external_id, name, attributes_at(claims, signer["enroll_attribute_claims_selector"]))


async def verify(ctx: Ctx) -> Claimed:
    """The first bearer token that verifies; 400 INVALID_ENROLLMENT_TOKEN when none does."""
    headers = ctx.request.headers
    signer = None
    wanted = headers.get(ISSUER_ID_HEADER)
    if wanted:
        signer = ctx.store.one("SELECT * FROM external_jwt_signers WHERE id = ? AND enabled = 1", (wanted,))
        if signer is None:
            log.info("token enrollment refused: no enabled signer %r", wanted)
            raise ApiError("INVALID_ENROLLMENT_TOKEN")
    for token in extjwt.bearer_tokens(headers):
        try:
            return await _verify_one(ctx, token, signer)
        except extjwt.Rejected as e:
            log.info("token enrollment refused: %s", e)
    raise ApiError("INVALID_ENROLLMENT_TOKEN")


def _not_allowed(reason: str) -> ApiError:
    log.info("token enrollment refused: %s", reason)
    return ApiError("INVALID_ENROLLMENT_NOT_ALLOWED")


def _already_enrolled(store, external_id: str) -> None:
    if store.value("SELECT 1 FROM identities WHERE external_id = ?", (external_id,)):
        raise ApiError("ENROLLMENT_IDENTITY_ALREADY_ENROLLED")


def check_allowed(ctx: Ctx, claimed: Claimed, to_cert: bool) -> str:
    """The auth policy the new identity gets, once the signer and that policy allow the mode."""
    signer = claimed.signer
    if to_cert and not signer["enroll_to_cert_enabled"]:
        raise _not_allowed(f"signer {signer['id']} does not allow enrollment to a certificate")
    if not to_cert and not signer["enroll_to_token_enabled"]:
        raise _not_allowed(f"signer {signer['id']} does not allow enrollment to token logins")
    policy_id = signer["enroll_auth_policy_id"] or DEFAULT_AUTH_POLICY
    row = ctx.store.one("SELECT primary_ FROM auth_policies WHERE id = ?", (policy_id,))
    if row is None:   # upstream: 500 (the policy is checked on every signer write, so rare)
        raise _not_allowed(f"auth policy {policy_id} does not exist")
    primary = normalized_policy(load_json(row["primary_"]), {})[0]
    if to_cert and not primary["cert"]["allowed"]:
        raise _not_allowed(f"auth policy {policy_id} does not allow certificate logins")
    if not to_cert:
        ext = primary["extJwt"]
        if not ext["allowed"] or (ext.get("allowedSigners") and signer["id"] not in ext["allowedSigners"]):
            raise _not_allowed(f"auth policy {policy_id} does not allow ext-jwt logins with signer {signer['id']}")
    return policy_id


def _create_identity(ctx: Ctx, claimed: Claimed, policy_id: str) -> str:
    values: dict[str, Any] = {"name": claimed.name, "type": "Default", "is_admin": False,
                              "role_attributes": claimed.attributes, "auth_policy_id": policy_id,
                              "external_id": claimed.external_id, "tags": {}}
    if IDENTITIES.prepare is not None:
        IDENTITIES.prepare(ctx, values, None)
    identity_id = crud.insert(ctx.store, IDENTITIES, values)
    crud.changed(ctx, IDENTITIES, identity_id, None, values)
    return identity_id


async def enroll_token(ctx: Ctx, client_csr: str) -> dict | None:
    """Verify the request's token and make its identity: the certificate chain and CA bundle
    (``{cert, ca}``) for a CSR, None for an enrollment to token logins."""
    claimed = await verify(ctx)
    store = ctx.store
    _already_enrolled(store, claimed.external_id)
    to_cert = bool(client_csr)
    policy_id = check_allowed(ctx, claimed, to_cert)
    leaf = ca.sign_csr(_csr(client_csr), signer_keypair(ctx.ctl), usage="client") if to_cert else None
    with store.write():
        _already_enrolled(store, claimed.external_id)   # another request may have enrolled it meanwhile
        identity_id = _create_identity(ctx, claimed, policy_id)
        if leaf is not None:
            _add_authenticator(ctx, {"identity_id": identity_id, "method": "cert", "cert_pem": leaf,
                                     "fingerprint": ca.fingerprint(leaf), "is_issued_by_network": True})
    log.info("identity %s enrolled through external JWT signer %s", identity_id, claimed.signer["id"])
    if leaf is None:
        return None
    return {"cert": certauth.chain_pem(ctx.ctl, leaf), "ca": certauth.ca_bundle_pem(ctx.ctl)}
