"""External JWT signers: ``POST /authenticate?method=ext-jwt`` and the ``requireExtJwtSigner``
secondary factor.

A JWT comes as ``Authorization: Bearer <jwt>`` (the first two such headers are tried). Its
header must name a ``kid``; its ``iss`` picks the enabled signer with exactly that issuer; the
key is found by ``kid`` in the signer's certificate (kid = the signer's ``kid``, else the
certificate's SHA-1 fingerprint) or in the JWKS fetched from ``jwksEndpoint``. Only asymmetric
algorithms that fit the key verify (RS*/PS* for RSA, ES* by curve, EdDSA): ``alg: none`` and HMAC
with a public key or certificate as the secret are refused. ``exp``/``nbf`` are checked against
the controller clock without leeway, ``aud`` must contain the signer's audience (a signer
without one never validates), and the claim ``claimsProperty`` picks (default ``sub``; a JSON
pointer, as OpenZiti 2.0 reads it, ``claim_at``) is the identity's ``externalId``
(``useExternalId``) or its id. ``enroll/token.py`` verifies enrollment tokens the same way.

JWKS keys are cached per controller and signer: fetched on first use and again when a token
names an unknown ``kid`` (at most once a second per signer); keys accumulate, none are evicted;
a change to the signer starts afresh. The fetch trusts the system CA store plus the PEM bundle
named by the setting ``jwks_ca_file`` or the environment variable ``ZITI_LITE_JWKS_CA_FILE``
(e.g. for a JWKS server with a private or self-signed certificate). Only the configured URL is
fetched: no redirect is followed, and nothing in a token (``jku``, ``x5u``, ``iss``) names a URL
to fetch, so an unauthenticated login cannot make the controller reach another address.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import json
import logging
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from starlette.concurrency import run_in_threadpool

from .. import clock
from ..api.context import Ctx
from ..errors import InvalidAuth
from .methods import Login, auth_query, method
from .policy import check_primary, identity_policy, is_disabled

if TYPE_CHECKING:
    from .sessions import AuthController

log = logging.getLogger("ziti_lite.extjwt")

MAX_CANDIDATES = 2
REFETCH_SECONDS = 1.0
FETCH_TIMEOUT = 5.0
MAX_JWKS_BYTES = 1 << 20
CA_FILE_ENV = "ZITI_LITE_JWKS_CA_FILE"
_CURVE_ALGS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512", "secp256k1": "ES256K"}


class Rejected(Exception):
    """This token does not authenticate (the reason is only logged)."""


# ---------------------------------------------------------------- key cache
@dataclass
class _Keys:
    version: tuple
    keys: dict[str, Any] = field(default_factory=dict)
    fetched_at: dt.datetime | None = None


def _cache(ctl: AuthController) -> dict[str, _Keys]:
    return ctl.extjwt_keys


def _entry(ctl: AuthController, signer: dict) -> _Keys:
    version = (signer["updated_at"], signer["cert_pem"], signer["jwks_endpoint"], signer["kid"])
    cache = _cache(ctl)
    entry = cache.get(signer["id"])
    if entry is None or entry.version != version:
        entry = cache[signer["id"]] = _Keys(version)
        if signer["cert_pem"]:
            entry.keys.update(_cert_keys(signer))
    return entry


def _cert_keys(signer: dict) -> dict[str, Any]:
    try:
        cert = x509.load_pem_x509_certificate(signer["cert_pem"].encode())
    except ValueError:
        log.warning("external jwt signer %s: certPem does not parse", signer["id"])
        return {}
    from cryptography.hazmat.primitives.serialization import Encoding
    kid = signer["kid"] or signer["fingerprint"] or hashlib.sha1(cert.public_bytes(Encoding.DER)).hexdigest()
    return {kid: cert.public_key()}


def _jwk_key(jwk: dict) -> Any:
    """The public key of one JWKS entry (its first ``x5c`` certificate if any); None for
    symmetric or unusable keys."""
    if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
        return None
    x5c = jwk.get("x5c")
    try:
        if isinstance(x5c, list) and x5c and isinstance(x5c[0], str):
            return x509.load_der_x509_certificate(base64.b64decode(x5c[0])).public_key()
        return jwt.PyJWK(jwk).key
    except Exception:  # a malformed key in someone else's JWKS: skip it
        return None


@functools.lru_cache(maxsize=8)
def _ssl_context(cafile: str | None, mtime: float) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if cafile:
        ctx.load_verify_locations(cafile)
    return ctx


def ssl_context(ctl: AuthController) -> ssl.SSLContext:
    cafile = ctl.settings.jwks_ca_file or os.environ.get(CA_FILE_ENV) or None
    mtime = os.path.getmtime(cafile) if cafile and os.path.exists(cafile) else 0.0
    return _ssl_context(cafile if mtime else None, mtime)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A JWKS endpoint's redirect is an error, not a second fetch: the controller only ever asks
    the URL an admin configured, never one a server (or a token) names."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        fp.close()
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to another URL refused ({msg})", headers, None)


def _download(url: str, context: ssl.SSLContext) -> bytes:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirects())
    with opener.open(req, timeout=FETCH_TIMEOUT) as r:  # admin-set URL, no redirects
        return r.read(MAX_JWKS_BYTES + 1)


async def _fetch(ctl: AuthController, signer: dict, entry: _Keys) -> None:
    now = clock.now()
    if entry.fetched_at is not None and (now - entry.fetched_at).total_seconds() < REFETCH_SECONDS:
        return
    entry.fetched_at = now
    url = signer["jwks_endpoint"]
    if not url or not url.lower().startswith(("https://", "http://")):
        return
    try:
        data = await run_in_threadpool(_download, url, ssl_context(ctl))
        if len(data) > MAX_JWKS_BYTES:
            raise ValueError("JWKS document too large")
        doc = json.loads(data)
    except Exception as e:
        log.warning("external jwt signer %s: JWKS fetch from %s failed: %s", signer["id"], url, e)
        return
    for jwk in (doc.get("keys") if isinstance(doc, dict) else None) or []:
        kid = jwk.get("kid") if isinstance(jwk, dict) else None
        if isinstance(kid, str) and kid:
            key = _jwk_key(jwk)
            if key is not None:
                entry.keys[kid] = key


def cached_key(ctl: AuthController, signer: dict, kid: str) -> Any:
    return _entry(ctl, signer).keys.get(kid)


async def key_for(ctl: AuthController, signer: dict, kid: str) -> Any:
    """The signer's key for ``kid``, fetching the JWKS when the kid is not known yet."""
    entry = _entry(ctl, signer)
    if kid not in entry.keys and signer["jwks_endpoint"]:
        await _fetch(ctl, signer, entry)
    return entry.keys.get(kid)


# ---------------------------------------------------------------- token checks
def bearer_tokens(headers) -> list[str]:
    if headers is None:
        return []
    values = headers.getlist("authorization") if hasattr(headers, "getlist") else [headers.get("authorization")]
    out = [v[7:].strip() for v in values if isinstance(v, str) and v.startswith("Bearer ")]
    return [t for t in out if t][:MAX_CANDIDATES]


def unverified(token: str) -> tuple[dict, dict]:
    """Header and claims, not yet trusted; the header must name a string ``kid`` and the claims
    a non-empty string ``iss``."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as e:
        raise Rejected(f"not a JWT: {e}") from None
    if not isinstance(header.get("kid"), str) or not header["kid"]:
        raise Rejected("no kid")
    if not isinstance(claims.get("iss"), str) or not claims["iss"]:
        raise Rejected("no iss")
    return header, claims


def algorithms_for(key: Any) -> set[str]:
    if isinstance(key, rsa.RSAPublicKey):
        return {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
    if isinstance(key, ec.EllipticCurvePublicKey):
        alg = _CURVE_ALGS.get(key.curve.name)
        return {alg} if alg else set()
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return {"EdDSA"}
    return set()


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def verify(token: str, header: dict, key: Any, signer: dict) -> dict:
    """The verified claims, or ``Rejected``."""
    alg = header.get("alg")
    if key is None:
        raise Rejected(f"unknown kid {header.get('kid')!r}")
    if alg not in algorithms_for(key):
        raise Rejected(f"algorithm {alg!r} does not fit the signer's key")
    try:
        claims = jwt.decode(token, key=key, algorithms=[alg], options={
            "verify_signature": True, "verify_exp": False, "verify_nbf": False, "verify_iat": False,
            "verify_aud": False, "verify_iss": False, "require": []})
    except jwt.PyJWTError as e:
        raise Rejected(f"signature: {e}") from None
    now = clock.now().timestamp()
    if "exp" in claims and (not _number(claims["exp"]) or now >= claims["exp"]):
        raise Rejected("expired")
    if "nbf" in claims and (not _number(claims["nbf"]) or now < claims["nbf"]):
        raise Rejected("not valid yet")
    if claims.get("iss") != signer["issuer"]:
        raise Rejected("issuer")
    aud, want = claims.get("aud"), signer["audience"]
    if not want or not (aud == want or (isinstance(aud, list) and want in aud)):
        raise Rejected("audience")
    return claims


def claim_at(claims: dict, selector: str) -> Any:
    """The value a claims selector picks: a JSON pointer (RFC 6901), a selector without the
    leading ``/`` read as one (``sub`` is ``/sub``), as OpenZiti 2.0 reads a signer's
    ``claimsProperty`` and enrollment selectors. ``KeyError`` when it picks nothing."""
    if not selector:
        raise KeyError(selector)
    value: Any = claims
    for part in (selector if selector.startswith("/") else "/" + selector)[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(part)
    return value


def claimed_id(signer: dict, claims: dict) -> str | None:
    """The identity's id (or externalId) in the claims: the string at the signer's
    ``claimsProperty``; None when there is none."""
    try:
        value = claim_at(claims, signer["claims_property"] or "sub")
    except KeyError:
        return None
    return value if isinstance(value, str) and value else None


def identity_for(store, signer: dict, claims: dict) -> dict | None:
    value = claimed_id(signer, claims)
    if not isinstance(value, str) or not value:
        return None
    column = "external_id" if signer["use_external_id"] else "id"
    return store.one(f"SELECT * FROM identities WHERE {column} = ?", (value,))


def signer_for_issuer(store, iss: str) -> dict | None:
    return store.one("SELECT * FROM external_jwt_signers WHERE issuer = ? AND enabled = 1", (iss,))


# ---------------------------------------------------------------- primary method
async def _login_with(ctx: Ctx, token: str) -> Login:
    store = ctx.store
    header, claims = unverified(token)
    signer = signer_for_issuer(store, claims["iss"])
    if signer is None:
        raise Rejected(f"no enabled signer for issuer {claims['iss']!r}")
    key = await key_for(ctx.ctl, signer, header["kid"])
    claims = verify(token, header, key, signer)
    ident = identity_for(store, signer, claims)
    if ident is None or is_disabled(ident):
        raise Rejected("no such identity, or disabled")
    found = identity_policy(store, ident["id"])
    if found is None:
        raise Rejected("no auth policy")
    try:
        check_primary(found[1], "ext-jwt", signer_id=signer["id"])
    except InvalidAuth:
        raise Rejected("auth policy refuses ext-jwt with this signer") from None
    return Login(ident["id"], f"extJwtId:{signer['id']}")


@method("ext-jwt", rank=3)
async def ext_jwt_login(ctx: Ctx, body) -> Login:
    for token in bearer_tokens(ctx.request.headers):
        try:
            return await _login_with(ctx, token)
        except Rejected as e:
            log.info("ext-jwt authentication refused: %s", e)
    raise InvalidAuth()


# ---------------------------------------------------------------- secondary factor
def secondary_ok(ctl: AuthController, signer_id: str, identity_id: str, headers) -> bool:
    """Does this request carry a bearer JWT from signer ``signer_id`` for ``identity_id``?
    Synchronous: uses keys already cached (``warm`` fetches missing JWKS keys beforehand)."""
    tokens = bearer_tokens(headers)
    if not tokens:
        return False
    store = ctl.store
    signer = store.one("SELECT * FROM external_jwt_signers WHERE id = ? AND enabled = 1", (signer_id,))
    if signer is None:
        return False
    for token in tokens:
        try:
            header, claims = unverified(token)
            claims = verify(token, header, cached_key(ctl, signer, header["kid"]), signer)
        except Rejected:
            continue
        ident = identity_for(store, signer, claims)
        if ident is not None and ident["id"] == identity_id:
            return True
    return False


async def warm(ctl: AuthController, headers) -> None:
    for token in bearer_tokens(headers):
        try:
            header, claims = unverified(token)
        except Rejected:
            continue
        signer = signer_for_issuer(ctl.store, claims["iss"])
        if signer is not None and signer["jwks_endpoint"]:
            await key_for(ctl, signer, header["kid"])


def ext_jwt_auth_query(ctx: Ctx, row: dict, secondary: dict) -> list:
    """The EXT-JWT auth query while the policy's required signer's JWT is missing."""
    signer_id = secondary.get("requireExtJwtSigner")
    if not signer_id or secondary_ok(ctx.ctl, signer_id, row["identity_id"], ctx.request.headers):
        return []
    signer = ctx.store.one("SELECT * FROM external_jwt_signers WHERE id = ?", (signer_id,))
    query: dict[str, Any] = {"typeId": "EXT-JWT", "provider": "url", "scopes": None}
    if signer is not None:
        query["id"] = signer["id"]
        query["scopes"] = json.loads(signer["scopes"]) if signer["scopes"] else None
        if signer["external_auth_url"]:
            query["httpUrl"] = signer["external_auth_url"]
        if signer["client_id"]:
            query["clientId"] = signer["client_id"]
    return [query]


auth_query(rank=2)(ext_jwt_auth_query)   # after MFA's, as upstream lists them
