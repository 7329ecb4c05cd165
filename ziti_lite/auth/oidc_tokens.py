"""The OIDC provider's tokens: access and refresh JWTs with upstream's claims, signed with the
controller's own TLS server key, their verification, and the revocation list.

Why here (the auth layer): a bearer access token is one more way to name an API session, so
``auth/sessions``-level code (``Controller.authorize``, the edge router's hello) must verify it
without importing the HTTP provider above.

Each OIDC login creates an ``api_sessions`` row whose id is the tokens' ``z_asid``: service
sessions, the router's checks, admin listing and deletion then work for token-based sessions as
for legacy ones. A token is accepted while its signature, audience, type and expiry hold, no
revocation refuses it (OpenZiti 2.0's ``/revocations``: its ``jti``, its API session, its
identity up to a cut-off; ``refusal``) and its API session row still exists, so logout, admin
deletion, identity disabling or deletion (all of which delete the row) revoke every token of the
session at once. Refreshing counts as activity on that row. The revocation list is this module's
too: the provider's own entries (rotated and logged-out tokens) and those of the API
(``resources/revocations.py``), which end the OIDC sessions they leave without a usable token.

Signing key: the TLS server certificate's key (``auth.certs.server_keypair``), ``kid`` the
certificate's SHA-1 fingerprint, alg from the key (ES256 for ziti-lite's P-256 keys), as upstream
signs with its server certificate. Renewal re-issues the certificate with the same key: the kid
changes, tokens signed before stay valid (they verify with the same key); JWKS publishes the
current certificate's key.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from .. import clock
from ..pki import ca
from ..pki.tokens import jwt_alg_for_key, sign_jwt
from . import sessions
from .certs import previous_server_certs, server_keypair

if TYPE_CHECKING:
    from .sessions import AuthController

CLIENT_IDS = ("openziti", "native")     # upstream's client, and its legacy one for early HA SDKs
AUDIENCE = "openziti"
REFRESH_SECONDS = 24 * 60 * 60           # upstream's defaults
ID_SECONDS = 30 * 60
TYPE_ACCESS, TYPE_REFRESH = "a", "r"
TYPE_TOTP = "t"           # a TOTP token: when an API session last gave a TOTP code
AMR_TOTP = "totp"


class Rejected(ValueError):
    """A token that is malformed, not ours, expired, of the wrong type, or revoked."""


def issuer(ctl: AuthController) -> str:
    return ctl.settings.base_url.rstrip("/") + "/oidc"


# upstream's certificate claims: extension requested, key roll requested, improper client chain
CERT_CLAIMS = ("z_cer", "z_ckrr", "z_iccc")


def cert_claims(store, authenticator_id: str, improper_chain: bool) -> dict:
    """The certificate claims of a login by ``authenticator_id``, as upstream sets them when the
    login is made (a certificate authenticator's extension request, the chain the client sent)."""
    auth = store.one("SELECT is_extend_requested, is_key_roll_requested FROM authenticators"
                     " WHERE id = ? AND method = 'cert'", (authenticator_id,))
    return {"z_cer": bool(auth and auth["is_extend_requested"]),
            "z_ckrr": bool(auth and auth["is_extend_requested"] and auth["is_key_roll_requested"]),
            "z_iccc": improper_chain}


def _b64u(n: int, size: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(size, "big")).rstrip(b"=").decode()


def jwks(ctl: AuthController) -> dict:
    """The public key set, as upstream's ``/oidc/keys``: the current server certificate's key
    first, then under the ``kid`` of each server certificate a renewal replaced (the same key:
    tokens signed before the renewal name those)."""
    pems = [server_keypair(ctl).cert_pem, *previous_server_certs(ctl)]
    return {"keys": [_jwk(pem) for pem in pems]}


def _jwk(pem: str) -> dict[str, Any]:
    pub = ca.load_cert(pem).public_key()
    key: dict[str, Any] = {"use": "sig", "kid": ca.fingerprint(pem), "alg": jwt_alg_for_key(pub)}
    if isinstance(pub, ec.EllipticCurvePublicKey):
        size = (pub.curve.key_size + 7) // 8
        nums = pub.public_numbers()
        crv = {256: "P-256", 384: "P-384", 521: "P-521"}[pub.curve.key_size]
        key.update(kty="EC", crv=crv, x=_b64u(nums.x, size), y=_b64u(nums.y, size))
    elif isinstance(pub, rsa.RSAPublicKey):
        nums_r = pub.public_numbers()
        key.update(kty="RSA", n=_b64u(nums_r.n, (nums_r.n.bit_length() + 7) // 8),
                   e=_b64u(nums_r.e, (nums_r.e.bit_length() + 7) // 8))
    return key


def _epoch() -> int:
    return int(clock.now().timestamp())


def at_hash(access_token: str) -> str:
    digest = hashlib.sha256(access_token.encode()).digest()
    return base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()


def issue(ctl: AuthController, *, identity_id: str, api_session_id: str, client_id: str, amr: list[str],
          config_types: list[str], scopes: list[str], auth_time: int, is_admin: bool, external_id: str | None,
          remote_address: str, cert_extendable: bool = False, cert_fingerprints: list[str] | None = None,
          nonce: str = "", sdk_info: Any = None, env_info: Any = None, with_id_token: bool = True,
          cert_flags: dict | None = None) -> dict:
    """A token answer (``access_token``, ``refresh_token``, ``id_token``…) for an API session;
    ``cert_flags``: the certificate claims of :func:`cert_claims` (all false without)."""
    now = _epoch()
    pair = server_keypair(ctl)
    custom: dict[str, Any] = {
        "z_asid": api_session_id, "z_ia": is_admin, "z_ct": config_types or None, "z_aid": client_id,
        "z_cfs": cert_fingerprints or None, "scopes": scopes, "z_sdk": sdk_info, "z_env": env_info,
        "z_ra": remote_address, "z_ice": cert_extendable,
        **{k: bool((cert_flags or {}).get(k)) for k in CERT_CLAIMS},
    }
    if external_id:
        custom["z_eid"] = external_id
    base = {"iss": issuer(ctl), "sub": identity_id, "aud": [client_id if client_id in CLIENT_IDS else AUDIENCE],
            "iat": now, "nbf": now, "auth_time": auth_time, "amr": amr}
    access_seconds = ctl.settings.oidc_access_seconds   # upstream: 30 minutes, as are ID tokens
    access = {"jti": str(uuid.uuid4()), **base, "exp": now + access_seconds, "client_id": client_id,
              "scope": " ".join(scopes), **custom, "z_t": TYPE_ACCESS}
    refresh = {"jti": str(uuid.uuid4()), **base, "exp": now + REFRESH_SECONDS, "client_id": client_id,
               **custom, "z_t": TYPE_REFRESH}
    access_token = sign_jwt(pair, access)
    out = {"access_token": access_token, "token_type": "Bearer", "refresh_token": sign_jwt(pair, refresh),
           "expires_in": access_seconds, "scope": " ".join(scopes)}
    if with_id_token:
        name = ctl.store.value("SELECT name FROM identities WHERE id = ?", (identity_id,))
        ident = {**base, "exp": now + ID_SECONDS, "azp": client_id, "client_id": client_id, "name": name,
                 "z_ia": is_admin, "at_hash": at_hash(access_token)}
        if nonce:
            ident["nonce"] = nonce
        out["id_token"] = sign_jwt(pair, ident)
    return out


def totp_token(ctl: AuthController, access: dict) -> tuple[str, dt.datetime]:
    """A TOTP token (``POST /current-api-session/totp-token``) for the API session an access token
    names, and when it was issued: upstream's claims (the access token's subject, audience and
    ``z_asid``, type ``t``) and no expiry (it lives as long as that session); an SDK hands it to
    the routers that evaluate MFA posture checks themselves."""
    now = clock.now()
    claims = {"iss": issuer(ctl), "sub": access["sub"], "aud": access.get("aud"), "iat": int(now.timestamp()),
              "jti": str(uuid.uuid4()), "z_asid": access["z_asid"], "z_t": TYPE_TOTP}
    return sign_jwt(server_keypair(ctl), claims), now


def _verify(ctl: AuthController, token: str, want_type: str) -> dict:
    """The claims of one of our tokens, or Rejected (signature, audience, expiry, type)."""
    pair = server_keypair(ctl)
    public = ca.load_cert(pair.cert_pem).public_key()
    if not isinstance(public, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)):
        raise Rejected("the server key cannot sign tokens")
    try:
        claims = jwt.decode(token, public, algorithms=[jwt_alg_for_key(public)],
                            options={"verify_aud": False, "require": ["exp", "sub", "jti"]}, leeway=0)
    except jwt.PyJWTError as e:
        raise Rejected(str(e)) from None
    aud = claims.get("aud")
    auds = aud if isinstance(aud, list) else [aud]
    if not any(a in CLIENT_IDS for a in auds):
        raise Rejected("the token is not for the openziti client")
    if claims.get("z_t") != want_type:
        raise Rejected(f"the token is not of type {want_type!r}")
    if claims.get("iss") != issuer(ctl):
        raise Rejected("the token was issued by another issuer")
    if not isinstance(claims.get("z_asid"), str):
        raise Rejected("the token names no API session")
    return claims


def is_revoked(store, jti: str) -> bool:
    """Whether ``jti``'s revocation is in force (one made with ``after`` is not, until then)."""
    at = store.value("SELECT created_at FROM revocations WHERE id = ?", (jti,))
    return at is not None and clock.parse(at) <= clock.now()


def revoke(store, jti: str, exp: int, after: float = 0) -> bool:
    """Put ``jti`` on the revocation list until ``exp`` (its token's expiry), in force ``after``
    seconds from now (at once by default: one in force later is brought forward); False when a
    revocation of it was in force already, or is to be when ``after`` is given."""
    expires = clock.fmt(dt.datetime.fromtimestamp(exp, dt.UTC))
    at = clock.fmt(clock.now() + dt.timedelta(seconds=after))
    with store.write():
        if store.value("SELECT 1 FROM revocations WHERE id = ?", (jti,)) is not None:
            if after or is_revoked(store, jti):
                return False
            store.execute("UPDATE revocations SET created_at = ?, updated_at = ? WHERE id = ?", (at, at, jti))
            return True
        store.execute("INSERT INTO revocations (id, created_at, updated_at, expires_at, type) VALUES (?,?,?,?,?)",
                      (jti, at, at, expires, REVOKE_JTI))
    return True


# ------------------------------------------------------------------ OpenZiti 2.0's revocations
# A revocation names a token (``JTI``: its ``jti``), an API session (``API_SESSION``: the
# tokens' ``z_asid``) or an identity (``IDENTITY``: the tokens' ``sub`` issued up to the second
# it was made, as upstream compares ``iat`` with the revocation's time truncated to the second).
REVOKE_JTI, REVOKE_API_SESSION, REVOKE_IDENTITY = "JTI", "API_SESSION", "IDENTITY"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_UUID_HEX = re.compile(r"[0-9a-f]{32}", re.I)


def is_uuid(text: str) -> bool:
    """Whether ``text`` is a UUID in one of the forms upstream's parser takes (36 characters
    with dashes, optionally ``urn:uuid:``-prefixed or in braces, or 32 hex digits)."""
    if text[:9].lower() == "urn:uuid:":
        text = text[9:]
    elif text[:1] == "{" and text[-1:] == "}":
        text = text[1:-1]
    return bool(_UUID.fullmatch(text) or (len(text) == 32 and _UUID_HEX.fullmatch(text)))


def new_api_session_id() -> str:
    """The id of an API session an OIDC login creates: a UUID, as upstream's ``z_asid`` (legacy
    API sessions keep their sortable ids), so an ``API_SESSION`` revocation, which must name a
    UUID, can name it, and only sessions whose tokens are JWTs are ever ended by one."""
    return str(uuid.uuid4())


def lifetime(ctl: AuthController) -> int:
    """Seconds a revocation is kept: the longest any of our tokens lives (upstream's
    ``MaxTokenDuration``, 24 h by default: the refresh token's)."""
    return max(REFRESH_SECONDS, ID_SECONDS, ctl.settings.oidc_access_seconds)


def put_revocation(ctl: AuthController, id: str, kind: str, tags: str = "{}") -> None:
    """Create or replace (upstream's ``CreateOrReplace``: a repeat refreshes the cut-off and the
    expiry) the revocation ``id`` of ``kind`` as of now, and end the API sessions it leaves
    without a usable token (``end_sessions``). Inside the caller's write."""
    now = clock.now()
    at, expires = clock.fmt(now), clock.fmt(now + dt.timedelta(seconds=lifetime(ctl)))
    with ctl.store.write():
        ctl.store.execute("DELETE FROM revocations WHERE id = ?", (id,))
        ctl.store.execute("INSERT INTO revocations (id, created_at, updated_at, expires_at, type, tags)"
                          " VALUES (?,?,?,?,?,?)", (id, at, at, expires, kind, tags))
        end_sessions(ctl.store, id, kind)


def end_sessions(store, id: str, kind: str) -> int:
    """Delete the API sessions whose every token a new revocation refuses: the OIDC session an
    ``API_SESSION`` one names, every OIDC session of an ``IDENTITY`` one's identity (its tokens,
    refresh tokens included, were all issued before the cut-off). Legacy sessions (zt-session
    tokens, which revocations do not touch) stay. What else ends with the row (service sessions,
    the routers' ApiSessionRemoved and SessionRemoved, the embedded router's channels) follows
    as for a logout. Returns how many went."""
    if kind == REVOKE_API_SESSION:
        ids = [id] if is_uuid(id) else []
    elif kind == REVOKE_IDENTITY:
        ids = [s for s in store.column("SELECT id FROM api_sessions WHERE identity_id = ?", (id,)) if is_uuid(s)]
    else:
        return 0
    for sid in ids:
        store.execute("DELETE FROM api_sessions WHERE id = ?", (sid,))
    return len(ids)


def refusal(store, claims: dict) -> str | None:
    """Why a revocation refuses a token with ``claims``, or None: its ``jti`` revoked (a
    revocation in force: ``created_at`` not in the future), its API session revoked, or its
    identity revoked at or after the second it was issued in."""
    rows = store.all("SELECT id, created_at FROM revocations WHERE id IN (?, ?, ?)",
                     (claims["jti"], claims["sub"], claims["z_asid"]))
    now = clock.now()
    for r in rows:
        at = clock.parse(r["created_at"])
        if r["id"] == claims["jti"] and at <= now:
            return "the token has been revoked"
        if r["id"] == claims["z_asid"] and at <= now:
            return "the token's API session has been revoked"
        if r["id"] == claims["sub"] and int(at.timestamp()) >= int(claims.get("iat") or 0):
            return "the token's identity has been revoked"
    return None


def prune(ctl: AuthController) -> None:
    """Drop revocations of tokens that have expired anyway (a janitor hook)."""
    with ctl.store.write():
        ctl.store.execute("DELETE FROM revocations WHERE expires_at < ?", (clock.stamp(),))


def verify_refresh(ctl: AuthController, token: str, grace: int = 0) -> dict:
    """The claims of a valid refresh token whose revocation (if any) is not in force, or came in
    force less than ``grace`` seconds ago; else Rejected."""
    claims = _verify(ctl, token, TYPE_REFRESH)
    revoked_at = ctl.store.value("SELECT created_at FROM revocations WHERE id = ?", (claims["jti"],))
    if revoked_at is not None:
        since = (clock.now() - clock.parse(revoked_at)).total_seconds()
        if since >= grace:
            raise Rejected("the refresh token has been revoked (used already, or logged out)")
    why = refusal(ctl.store, {**claims, "jti": ""})    # its own jti: the grace above
    if why is not None:
        raise Rejected(why)
    return claims


def id_token(ctl: AuthController, claims: dict) -> str:
    """An ID token for the subject of verified ``claims`` (token exchange)."""
    now = _epoch()
    return sign_jwt(server_keypair(ctl), {
        "iss": issuer(ctl), "sub": claims["sub"], "aud": claims.get("aud"), "iat": now, "nbf": now,
        "exp": now + ID_SECONDS, "auth_time": claims.get("auth_time", now), "amr": claims.get("amr") or [],
        "azp": claims.get("client_id", "")})


_CACHE_MAX = 10_000


def verify_access(ctl: AuthController, token: str) -> dict:
    """The claims of a valid, unrevoked access token, or Rejected. Verified signatures are cached
    per process (the revocation list and the session row are read on every call)."""
    cache: dict[str, dict] = ctl.oidc_verified
    claims = cache.get(token)
    if claims is None:
        claims = _verify(ctl, token, TYPE_ACCESS)
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[token] = claims
    elif claims["exp"] <= _epoch():
        cache.pop(token, None)
        raise Rejected("the access token has expired")
    why = refusal(ctl.store, claims)
    if why is not None:
        raise Rejected(why)
    return claims


def bearers(headers) -> list[str]:
    """The ``Authorization: Bearer`` values that look like JWTs with a ``kid`` (ours, or an
    external signer's for a secondary ext-jwt factor, sent beside ours)."""
    if headers is None:
        return []
    out = []
    for value in headers.getlist("authorization") if hasattr(headers, "getlist") else [headers.get("authorization")]:
        if value and value[:7].lower() == "bearer ":
            token = value[7:].strip()
            try:
                head = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
            except (ValueError, IndexError):
                continue
            if isinstance(head, dict) and head.get("kid"):
                out.append(token)
    return out


def bearer(headers) -> str | None:
    """The first of ``bearers``, else None."""
    found = bearers(headers)
    return found[0] if found else None


def session_row(ctl: AuthController, claims: dict) -> dict | None:
    """The API session row a token names (its identity must match the token's subject)."""
    row = ctl.store.one("SELECT token, identity_id FROM api_sessions WHERE id = ?", (claims["z_asid"],))
    if row is None or row["identity_id"] != claims["sub"]:
        return None
    return row


def lookup(ctl: AuthController, headers) -> sessions.Session | None:
    """The Session a bearer access token on the request stands for, or None: the same identity,
    partial state, inactivity expiry and revocation as the API session row it names."""
    for token in bearers(headers):
        try:
            claims = verify_access(ctl, token)
        except Rejected:
            continue
        break
    else:
        return None
    row = session_row(ctl, claims)
    if row is None:
        return None
    session = sessions.lookup(ctl, row["token"], headers)
    if session is not None:
        session.bearer = token
    return session


def digest(value: str) -> str:
    """PKCE S256: base64url(SHA-256(verifier)) without padding."""
    h = hashes.Hash(hashes.SHA256())
    h.update(value.encode())
    return base64.urlsafe_b64encode(h.finalize()).rstrip(b"=").decode()
