"""Certificates as credentials: trust anchors, ``method=cert`` logins, CA verification and the
self-service extension of a network-issued client certificate.

Trust anchors are the controller CA bundle (root + signing CA, what ``/.well-known/est/cacerts``
serves) and the CA entities, each with its own rules: authentication needs a CA that is verified
and auth-enabled, OTT-CA enrollment the enrollment's CA, auto enrollment a verified CA with auto
enrollment on. Chains are verified here against what the database says now, whatever the TLS
handshake let through (see ``tls.py``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from .. import clock
from ..api.context import Ctx
from ..errors import ApiError, InvalidAuth, NotFound, Unauthorized, generic_cause
from ..pki import ca as pki
from ..pki import claims
from ..pki.csr import CsrError, parse_csr
from .policy import identity_policy, is_disabled

if TYPE_CHECKING:
    from .sessions import AuthController


# ------------------------------------------------------------------ anchors
def server_keypair(ctl: AuthController) -> pki.KeyPair:
    return pki.KeyPair(ctl.state["server_cert"], ctl.state["server_key"])


def signer_keypair(ctl: AuthController) -> pki.KeyPair:
    return pki.KeyPair(ctl.state["signer_cert"], ctl.state["signer_key"])


def previous_server_certs(ctl: AuthController) -> list[str]:
    """Server certificates a renewal replaced (``lifecycle/renewal.py``), newest first: session
    tokens signed before name them as their ``kid``."""
    previous = ctl.state.get("server_cert_previous")
    return json.loads(previous) if previous else []


def controller_cas(ctl: AuthController) -> list[str]:
    """The root and signing CA, and a signing CA replaced by a renewal until its own end
    (``lifecycle/renewal.py``: the same key, so what it signed verifies either way)."""
    previous = ctl.state.get("signer_cert_previous")
    return [ctl.state["root_cert"], ctl.state["signer_cert"], *(json.loads(previous) if previous else ())]


def ca_bundle_pem(ctl: AuthController) -> str:
    """The controller CA bundle as one PEM string (``ca`` of enroll and extend answers)."""
    return pki.chain_pem(*controller_cas(ctl))


def chain_pem(ctl: AuthController, leaf_pem: str) -> str:
    """A certificate issued by the signing CA followed by its intermediates (the root excluded)."""
    return pki.chain_pem(leaf_pem, ctl.state["signer_cert"])


def ca_rows(store, where: str = "1", params=()) -> list[dict]:
    return store.all(f"SELECT * FROM cas WHERE {where} ORDER BY created_at, id", params)


def claim_of(ca_row: dict) -> dict | None:
    text = ca_row.get("external_id_claim")
    return json.loads(text) if text else None


# verdicts of time-independent chain checks (check_time=False: cert logins), keyed by the
# presented certificates and the anchors themselves, so a changed CA set never hits a stale one
_VERDICTS: dict[tuple, bool] = {}
_VERDICTS_MAX = 4096


def chains_to(certs: list[x509.Certificate], anchors, *, check_time: bool, eku: str | None) -> bool:
    key = None
    if not check_time:
        try:
            key = (tuple(certs), tuple(anchors), eku)
            hit = _VERDICTS.get(key)
        except TypeError:   # an unhashable anchor: no caching
            key = hit = None
        if hit is not None:
            return hit
    try:
        verdict = pki.verify_chain(certs[0], certs[1:], anchors, allow_expired=not check_time, eku=eku)
    except pki.ChainError:
        verdict = False
    if key is not None:
        if len(_VERDICTS) >= _VERDICTS_MAX:
            _VERDICTS.clear()
        _VERDICTS[key] = verdict
    return verdict


def first_ca(store, certs, where: str, params=(), *, check_time: bool, eku: str | None) -> dict | None:
    """The first CA entity (matching ``where``) that ``certs`` chain to."""
    for row in ca_rows(store, where, params):
        try:
            anchors = pki.load_certs(row["cert_pem"])
        except ValueError:
            continue
        if chains_to(certs, anchors, check_time=check_time, eku=eku):
            return row
    return None


@functools.lru_cache(maxsize=1024)
def fingerprint(cert: x509.Certificate) -> str:
    """The certificate's SHA-1 fingerprint (cached: certificates are immutable, hashed by DER)."""
    return pki.fingerprint(cert)


def pem_of(cert: x509.Certificate) -> str:
    return pki.chain_pem(cert)


# ------------------------------------------------------------------ method=cert
def login(ctx: Ctx, certs: list[x509.Certificate]):
    """Who the presented certificates authenticate: ``(identity_id, authenticator_id,
    cert_extendable, improper_chain)``; raises INVALID_AUTH for anything else.

    As upstream, the chain is tried against the controller's root alone first, then against root
    and intermediates: a chain that verifies only with the second needed an intermediate the
    client did not send (``improper_chain``; the authenticator's ``lastAuthResolvedToRoot`` is
    its negation)."""
    store = ctx.store
    if not certs:
        raise InvalidAuth()
    leaf = certs[0]
    third_party = None
    improper = False
    if chains_to(certs, [ctx.ctl.state["root_cert"]], check_time=False, eku=None):
        pass
    elif chains_to(certs, controller_cas(ctx.ctl), check_time=False, eku=None):
        improper = True
    else:
        third_party = first_ca(store, certs, "is_verified = 1 AND is_auth_enabled = 1", check_time=False, eku=None)
        if third_party is None:
            raise InvalidAuth()
    external_id = ""
    if third_party is not None:
        try:
            external_id = claims.external_id(claim_of(third_party), leaf)
        except claims.ClaimError:
            external_id = ""
    auth = None
    if external_id:
        identity_id = store.value("SELECT id FROM identities WHERE external_id = ?", (external_id,))
        if identity_id is None:
            raise InvalidAuth()
        authenticator_id = "internal"
    else:
        auth = store.one("SELECT id, identity_id, cert_pem, is_issued_by_network, last_auth_resolved_to_root"
                         " FROM authenticators WHERE method = 'cert' AND fingerprint = ?", (fingerprint(leaf),))
        if auth is None:
            raise InvalidAuth()
        identity_id, authenticator_id = auth["identity_id"], auth["id"]
    found = identity_policy(store, identity_id)
    if found is None:
        raise InvalidAuth()
    ident, policy = found
    cert_rules = policy["primary"].get("cert") or {}
    if is_disabled(ident) or not cert_rules.get("allowed", True):
        raise InvalidAuth()
    if not cert_rules.get("allowExpiredCerts", True):
        now = clock.now()
        if not (leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc):
            raise InvalidAuth()
    if auth is not None:
        _keep_up_to_date(store, auth, leaf, resolved_to_root=not improper)
    extendable = bool(auth and auth["is_issued_by_network"])
    return identity_id, authenticator_id, extendable, improper


def _keep_up_to_date(store, auth: dict, leaf: x509.Certificate, *, resolved_to_root: bool) -> None:
    """Upstream's bookkeeping at a cert login: the certificate stored when missing, and for a
    network-issued one whether the client sent the chain up to the root."""
    values: dict = {}
    if not auth["cert_pem"]:
        values["cert_pem"] = pem_of(leaf)
    if auth["is_issued_by_network"] and bool(auth["last_auth_resolved_to_root"]) != resolved_to_root:
        values["last_auth_resolved_to_root"] = int(resolved_to_root)
    if values:
        sets = ", ".join(f"{k} = ?" for k in values)
        with store.write():
            store.execute(f"UPDATE authenticators SET {sets}, updated_at = ? WHERE id = ?",
                          (*values.values(), clock.stamp(), auth["id"]))


# ------------------------------------------------------------------ admin-created cert authenticators
def prepare_cert_authenticator(ctx: Ctx, values: dict) -> None:
    """One PEM certificate that chains to the controller bundle or a verified CA (checked at the
    certificate's own NotBefore, as upstream)."""
    pem = values.pop("cert_pem", None) or ""
    try:
        certs = pki.load_certs(pem)
    except Exception:
        certs = []
    if len(certs) != 1:
        raise ApiError("COULD_NOT_PARSE_PEM_BLOCK")
    cert = certs[0]
    at = cert.not_valid_before_utc
    ca_id = None
    try:
        pki.verify_chain(cert, [], controller_cas(ctx.ctl), at=at)
    except pki.ChainError:
        for row in ca_rows(ctx.store, "is_verified = 1"):
            try:
                pki.verify_chain(cert, [], pki.load_certs(row["cert_pem"]), at=at)
            except (pki.ChainError, ValueError):
                continue
            ca_id = row["id"]
            break
        else:
            raise ApiError("CERT_FAILED_VALIDATION")
    values["cert_pem"] = pem_of(cert)
    values["fingerprint"] = fingerprint(cert)
    values["is_issued_by_network"] = False
    values["ca_id"] = ca_id
    values.pop("username", None)
    values.pop("password", None)


# ------------------------------------------------------------------ CA verification
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def verify_ca(ctx: Ctx, row: dict, body: bytes) -> None:
    """``POST /cas/{id}/verify``: a certificate signed by the CA whose CN is the CA's
    verification token marks it verified. Checks and codes in upstream's order."""
    if row["is_verified"]:
        raise ApiError("CA_ALREADY_VERIFIED")
    text = body.decode("utf-8", "replace") if body else ""
    m = _PEM_BLOCK.search(text)
    if not text.strip() or m is None:
        raise ApiError("COULD_NOT_PARSE_BODY")
    if m.group(1) != "CERTIFICATE":
        cause = generic_cause(f"encountered PEM block type {m.group(1)}")
        raise ApiError("EXPECTED_PEM_CERTIFICATE", cause=cause)
    try:
        der = base64.b64decode("".join(m.group(2).split()), validate=True)
        cert = x509.load_der_x509_certificate(der)
        cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except (binascii.Error, ValueError) as e:
        raise ApiError("COULD_NOT_PARSE_DER_BLOCK", cause=generic_cause(str(e))) from None
    cn = cns[0].value if cns else ""
    if cn != row["verification_token"]:
        raise ApiError("INVALID_COMMON_NAME")
    try:
        pki.verify_chain(cert, [], pki.load_certs(row["cert_pem"])[:1])
    except (pki.ChainError, ValueError) as e:
        raise ApiError("CERTIFICATE_FAILED_VALIDATION", cause=generic_cause(str(e))) from None


# ------------------------------------------------------------------ certificate extension
def extend(ctx: Ctx, auth: dict, certs: list[x509.Certificate], csr_pem: str) -> dict:
    """Issue a new certificate for a network-issued cert authenticator of the caller, kept
    unverified (the current one keeps working) until :func:`verify_extension`."""
    if not certs:
        raise Unauthorized()
    if auth["method"] != "cert":
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR")
    if auth["identity_id"] != ctx.identity_id:
        raise Unauthorized()
    if not auth["is_issued_by_network"] or not auth["cert_pem"] or not auth["fingerprint"]:
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR")
    peer = certs[0]
    if fingerprint(peer) != auth["fingerprint"]:
        raise Unauthorized()
    if not chains_to(certs, controller_cas(ctx.ctl), check_time=False, eku="client"):
        raise Unauthorized()
    try:
        csr = parse_csr(csr_pem)
    except CsrError as e:
        raise ApiError("COULD_NOT_PROCESS_CSR", cause=generic_cause(str(e))) from None
    current = pki.load_cert(auth["cert_pem"])
    try:
        sans = list(current.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        sans = []
    leaf = pki.sign_csr(csr, signer_keypair(ctx.ctl), usage="client", sans=sans)
    with ctx.store.write():
        ctx.store.execute(
            "UPDATE authenticators SET unverified_cert_pem = ?, unverified_fingerprint = ?,"
            " updated_at = ? WHERE id = ?",
            (leaf, pki.fingerprint(leaf), clock.stamp(), auth["id"]),
        )
    return {"clientCert": chain_pem(ctx.ctl, leaf), "ca": ca_bundle_pem(ctx.ctl)}


def verify_extension(ctx: Ctx, auth: dict, cert_pem: str) -> None:
    """Promote the certificate issued by :func:`extend`: from now on it, not the old one,
    authenticates."""
    if auth["method"] != "cert":
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR")
    if auth["identity_id"] != ctx.identity_id:
        raise Unauthorized()
    if not auth["cert_pem"] or not auth["unverified_cert_pem"] or not auth["unverified_fingerprint"]:
        raise ApiError("CAN_NOT_UPDATE_AUTHENTICATOR")
    try:
        presented = pki.load_certs(cert_pem or "")
    except Exception:
        presented = []
    if not presented or fingerprint(presented[0]) != auth["unverified_fingerprint"]:
        raise ApiError("INVALID_CLIENT_CERT")
    rolled = _public_key_der(presented[0]) != _public_key_der(pki.load_cert(auth["cert_pem"]))
    with ctx.store.write():
        # as upstream: a pending request to extend (and roll keys) is fulfilled; when it was asked
        # (extendRequestedAt) stays, and whether this extension brought a new key is kept
        ctx.store.execute(
            "UPDATE authenticators SET cert_pem = unverified_cert_pem, fingerprint = unverified_fingerprint,"
            " unverified_cert_pem = NULL, unverified_fingerprint = NULL, is_extend_requested = 0,"
            " is_key_roll_requested = 0, last_extend_rolled_keys = ?, updated_at = ? WHERE id = ?",
            (int(rolled), clock.stamp(), auth["id"]),
        )


def _public_key_der(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)


def request_extend(ctx: Ctx, id: str, roll_keys: bool) -> tuple[dict, dict]:
    """``POST /authenticators/{id}/request-extend``: flag a certificate authenticator so that its
    identity's SDK extends it (with a new key when ``roll_keys``). Returns the row before and the
    values written. Refusals as upstream's: unknown 404; any other method 401 with its cause."""
    row = ctx.store.one("SELECT * FROM authenticators WHERE id = ?", (id,))
    if row is None:
        raise NotFound("authenticator", id)
    if row["method"] != "cert":
        raise Unauthorized("authenticator is not a certificate authenticator")
    values = {"is_extend_requested": True, "is_key_roll_requested": roll_keys, "extend_requested_at": clock.stamp()}
    ctx.store.execute(
        "UPDATE authenticators SET is_extend_requested = 1, is_key_roll_requested = ?, extend_requested_at = ?,"
        " updated_at = ? WHERE id = ?", (int(roll_keys), values["extend_requested_at"], clock.stamp(), id))
    return row, values
