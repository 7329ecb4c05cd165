"""Enrollment JWTs, as an upstream controller signs them.

Header ``{"alg":"RS256","kid":"<sha1 hex of server cert DER>","typ":"JWT"}`` (keys sorted, as Go
emits them; alg follows the key: RSA → RS256, EC P-256/384/521 → ES256/384/512).

Payload, in upstream's key order::

    {"iss":"https://host:port","sub":"<identity or router id>","aud":[""],"exp":<int>,
     "jti":"<enrollment token>","em":"ott|ottca|updb|erott|trott","ctrls":null}

Signed with the private key of the TLS server certificate (clients verify the JWT against the
leaf certificate that ``iss`` presents), never with the signing CA.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ziti_lite import clock

from .ca import CertLike, KeyPair, fingerprint, load_cert, load_private_key

__all__ = [
    "TokenError",
    "jwt_alg_for_key",
    "sign_jwt",
    "enrollment_jwt",
    "network_jwt",
    "ca_enrollment_jwt",
    "verify_enrollment_jwt",
    "ENROLLER_AUDIENCE",
]

ENROLLER_AUDIENCE = "openziti-enroller"
_EC_ALGS = {256: "ES256", 384: "ES384", 521: "ES512"}


class TokenError(ValueError):
    """A JWT is malformed, not signed by the expected server certificate, or expired."""


def jwt_alg_for_key(key: Any) -> str:
    """JWS alg for a private or public key: RSA → RS256, EC P-256/384/521 → ES256/384/512."""
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        return "RS256"
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        try:
            return _EC_ALGS[key.curve.key_size]
        except KeyError:
            raise ValueError(f"unsupported EC curve {key.curve.name}") from None
    raise ValueError(f"unsupported JWT signing key {type(key).__name__}")


def sign_jwt(server: KeyPair, claims: dict[str, Any]) -> str:
    """Sign ``claims`` (key order kept) with the server key; header alg/kid/typ as upstream."""
    key = load_private_key(server.key_pem)
    return jwt.encode(
        claims,
        key,
        algorithm=jwt_alg_for_key(key),
        headers={"kid": fingerprint(server.cert_pem), "typ": "JWT"},
    )


def _epoch(t: dt.datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp())  # Go's jwt NumericDate: whole seconds, truncated


def enrollment_jwt(
    *,
    server: KeyPair,
    issuer: str,
    subject: str,
    token: str,
    method: str,
    expires_at: dt.datetime,
    ctrls: Sequence[str] | None = None,
) -> str:
    """The enrollment JWT of an identity (``ott``/``ottca``/``updb``) or router
    (``erott``/``trott``). ``issuer`` is ``https://host:port`` (no trailing slash, no path);
    ``token`` the enrollment token (``jti``); ``ctrls`` the HA peers' URLs (null when none)."""
    claims = {
        "iss": issuer,
        "sub": subject,
        "aud": [""],
        "exp": _epoch(expires_at),
        "jti": token,
        "em": method,
        "ctrls": list(ctrls) if ctrls else None,
    }
    return sign_jwt(server, claims)


def _slash(issuer: str) -> str:
    return issuer if issuer.endswith("/") else issuer + "/"


def network_jwt(*, server: KeyPair, issuer: str, jti: str | None = None) -> str:
    """``GET /network-jwts`` token: iss = sub = ``https://host:port/`` (trailing slash),
    aud ``["openziti-enroller"]``, em ``network``, random jti, no exp."""
    iss = _slash(issuer)
    claims = {"iss": iss, "sub": iss, "aud": [ENROLLER_AUDIENCE], "jti": jti or str(uuid.uuid4()),
              "em": "network", "ctrls": None}
    return sign_jwt(server, claims)


def ca_enrollment_jwt(*, server: KeyPair, issuer: str, ca_id: str) -> str:
    """``GET /cas/{id}/jwt`` token: iss ``https://host:port/``, sub = jti = CA id,
    aud ``["openziti-enroller"]``, em ``ca``, no exp."""
    claims = {"iss": _slash(issuer), "sub": ca_id, "aud": [ENROLLER_AUDIENCE], "jti": ca_id,
              "em": "ca", "ctrls": None}
    return sign_jwt(server, claims)


def verify_enrollment_jwt(
    token: str,
    server_cert_pem: CertLike,
    *,
    check_exp: bool = True,
    at: dt.datetime | None = None,
    leeway: float = 0,
) -> dict[str, Any]:
    """Verify a JWT the way an SDK does (signature by the server certificate's public key) and
    return its claims. Also checks that ``kid``, when present, is that certificate's SHA-1
    fingerprint, and (unless ``check_exp`` is False) that ``exp`` is after ``at`` (default: now).
    Raises :class:`TokenError`."""
    try:
        header = jwt.get_unverified_header(token)
        cert = load_cert(server_cert_pem)
    except (jwt.PyJWTError, ValueError) as e:
        raise TokenError(f"malformed JWT or certificate: {e}") from e
    pub = cert.public_key()
    try:
        alg = jwt_alg_for_key(pub)
    except ValueError as e:
        raise TokenError(str(e)) from e
    assert isinstance(pub, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey))  # the only keys jwt_alg_for_key takes
    if header.get("alg") != alg:
        raise TokenError(f"JWT alg {header.get('alg')!r} does not match the server key ({alg})")
    kid = header.get("kid")
    if kid is not None and kid != fingerprint(cert):
        raise TokenError("JWT kid is not the server certificate fingerprint")
    try:
        claims = jwt.decode(
            token,
            pub,
            algorithms=[alg],
            options={"verify_aud": False, "verify_exp": False, "verify_iat": False,
                     "verify_nbf": False, "verify_iss": False, "verify_sub": False,
                     "verify_jti": False, "require": []},
        )
    except jwt.PyJWTError as e:
        raise TokenError(f"JWT does not verify: {e}") from e
    if check_exp and "exp" in claims:
        now = at or clock.now()
        if now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        try:
            exp = float(claims["exp"])
        except (TypeError, ValueError):
            raise TokenError("JWT exp is not a number") from None
        if now.timestamp() >= exp + leeway:
            raise TokenError("JWT has expired")
    return claims
