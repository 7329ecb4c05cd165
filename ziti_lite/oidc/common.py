"""What the OIDC provider's modules share: the auth request record, the request and answer
helpers (OAuth errors, the edge API's error shape, forms and JSON bodies, the login page) and
the constants of upstream's provider. Package-internal: the underscored names are used by
``provider.py``, ``login.py`` and ``grants.py`` only."""

from __future__ import annotations

import fnmatch
import html
import json
import logging
import re
import urllib.parse
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..auth import oidc_tokens as tokens
from ..errors import ApiError
from ..pki.ca import fingerprint
from ..tls import peer_certs

if TYPE_CHECKING:
    from ..auth.sessions import AuthController
    from .provider import Provider

log = logging.getLogger("ziti_lite")

AUTH_REQUEST_SECONDS = 10 * 60      # upstream drops auth requests older than ten minutes
# the redirect and post-logout URIs upstream's provider allows when its configuration names none
# (patterns as Go's path.Match reads them); serve's --oidc-redirect-uri and --oidc-post-logout-uri
# add to them (``Provider.redirect_uris``, ``logout_uris``)
REDIRECT_GLOBS = ("openziti://auth/callback", "https://127.0.0.1:*/auth/callback", "http://127.0.0.1:*/auth/callback",
                  "https://localhost:*/auth/callback", "http://localhost:*/auth/callback")
LOGOUT_GLOBS = ("openziti://auth/logout", "https://127.0.0.1:*/auth/logout", "http://127.0.0.1:*/auth/logout",
                "https://localhost:*/auth/logout", "http://localhost:*/auth/logout")
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TT_REFRESH = "urn:ietf:params:oauth:token-type:refresh_token"
TT_ACCESS = "urn:ietf:params:oauth:token-type:access_token"
TT_ID = "urn:ietf:params:oauth:token-type:id_token"
ID_TOKEN_GRACE_SECONDS = 60     # see _exchange_grant
# a refresh token replaced by a refresh still works this long, as upstream's (v2.0.3 queues the
# revocation of a replaced refresh token and writes the queue once a minute): a client whose answer
# to a refresh was lost (ZAC 4.5 reloaded while refreshing) refreshes again with the token it
# holds, where refusing it would log it out. A revocation (logout) is in force at once.
REUSE_SECONDS = 60
_CONTACT = " If you have any questions, you may contact the administrator of the application."


@dataclass
class AuthRequest:
    id: str
    client_id: str
    redirect_uri: str
    state: str
    nonce: str
    scopes: list[str]
    challenge: str
    created: float
    identity_id: str = ""
    authenticator_id: str = ""
    amr: list[str] = field(default_factory=list)
    config_types: list[str] = field(default_factory=list)
    totp_required: bool = False
    totp_enrolled: bool = False
    cert_extendable: bool = False
    cert_flags: dict = field(default_factory=dict)   # the certificate claims of the login (z_cer, z_ckrr, z_iccc)
    auth_time: int = 0
    sdk_info: Any = None
    env_info: Any = None
    code: str = ""
    fingerprints: list[str] = field(default_factory=list)   # certificates shown on the way (z_cfs)

    def done(self) -> bool:
        return bool(self.identity_id) and (not self.totp_required or tokens.AMR_TOTP in self.amr)


def oauth_error(error: str, description: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


def uri_pattern(pattern: str) -> re.Pattern[str]:
    """A redirect URI pattern as upstream's provider matches it (Go's ``path.Match``): ``*`` any
    run of characters but ``/``, ``?`` one such character, ``[...]`` a class (``^`` negates, never
    ``/``), ``\\`` quotes the next one; anything else stands for itself. A malformed pattern
    (an unclosed class, a trailing backslash) is a ValueError."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\":
            if i + 1 == n:
                raise ValueError(f"{pattern!r}: a trailing backslash")
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] == "^" else i + 1)
            if end < 0:
                raise ValueError(f"{pattern!r}: an unclosed [")
            body = pattern[i + 1:end]
            negated = body.startswith("^")
            if not body[negated:]:
                raise ValueError(f"{pattern!r}: an empty class")
            members = "".join(re.escape(ch) if ch != "-" else "-" for ch in body[negated:])
            out.append(f"[^/{members}]" if negated else f"(?!/)[{members}]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    try:
        return re.compile("".join(out) + r"\Z", re.DOTALL)
    except re.error as e:   # a class's range out of order
        raise ValueError(f"{pattern!r}: {e}") from None


def patterns(uris: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(uri_pattern(u) for u in uris)


def _allowed(uri: str, allowed: tuple[re.Pattern[str], ...]) -> bool:
    return any(p.match(uri) for p in allowed)


def _redirect_error(req_uri: str, error: str, description: str, state: str) -> Response:
    q = {"error": error, "error_description": description}
    if state:
        q["state"] = state
    sep = "&" if "?" in req_uri else "?"
    return RedirectResponse(req_uri + sep + urllib.parse.urlencode(q), status_code=302)


def jwks_alg(ctl: AuthController) -> str:
    return tokens.jwks(ctl)["keys"][0]["alg"]


def _api_error(status: int, code: str, message: str) -> JSONResponse:
    """A login step's API error as upstream's OIDC provider writes it: the bare error, no envelope."""
    return JSONResponse({"code": code, "message": message}, status_code=status)


def refusal(e: ApiError) -> JSONResponse:
    """A refused login step as OpenZiti 2.0 answers it to a JSON client: the bare API error
    (``{"code": "INVALID_AUTH", "message": ...}``, no envelope) with the error's status."""
    body: dict[str, Any] = {"code": e.code, "message": e.message}
    cause = e.cause or {}
    if "code" in cause and "message" in cause:
        body["cause"] = {"code": cause["code"], "message": cause["message"]}
    return JSONResponse(body, status_code=e.status)


def wants_html(request: Request) -> bool:
    """Whether the login steps answer in HTML: upstream's negotiation, the first type of
    ``Accept`` (by q) that is JSON or HTML decides; no ``Accept``, ``*/*`` or neither: JSON."""
    entries = []
    for i, part in enumerate(request.headers.get("accept", "").split(",")):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        entries.append((-q, i, media.strip().lower()))
    for _, _, media in sorted(entries):
        if fnmatch.fnmatchcase("application/json", media):
            return False
        if fnmatch.fnmatchcase("text/html", media):
            return True
    return False


def _peer_cert(request: Request) -> bool:
    return bool(peer_certs(request))


def _fingerprints(request: Request) -> list[str]:
    """SHA-1 hex of the client's leaf certificate on this request (none: [])."""
    certs = peer_certs(request)
    return [fingerprint(certs[0])] if certs else []


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _strings(v: Any) -> list[str] | None:
    """Config type names as a login sends them: a comma-separated string or a list of strings."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str)][:100]
    return None


def _info(v: Any) -> dict[str, str] | None:
    """SDK or environment info for the token claims: string values only, bounded."""
    if not isinstance(v, dict):
        return None
    return {k[:64]: x[:255] for k, x in list(v.items())[:16] if isinstance(k, str) and isinstance(x, str)} or None


def _is_json(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip() == "application/json"


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (OAuth's), first value of each key."""
    raw = await request.body()
    try:
        pairs = urllib.parse.parse_qsl(raw.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        return {}
    out: dict[str, str] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out
_SDK_FIELDS = {"sdkAppId": "appId", "sdkAppID": "appId",  # upstream's name, and ours before
               "sdkAppVersion": "appVersion", "sdkBranch": "branch", "sdkRevision": "revision",
               "sdkType": "type", "sdkVersion": "version"}
_ENV_FIELDS = {"envArch": "arch", "envOs": "os", "envOsRelease": "osRelease", "envOsVersion": "osVersion"}


async def _payload(request: Request) -> dict[str, Any]:
    """A login step's body: JSON, or a form as SDKs post it (``configTypes`` repeated, SDK and
    environment info as flat ``sdk…``/``env…`` fields)."""
    raw = await request.body()
    if _is_json(request):
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    try:
        pairs = urllib.parse.parse_qsl(raw.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        return {}
    out: dict[str, Any] = {}
    sdk: dict[str, str] = {}
    env: dict[str, str] = {}
    for k, v in pairs:
        if k == "configTypes":
            out.setdefault(k, []).append(v)
        elif k in _SDK_FIELDS:
            if v:
                sdk[_SDK_FIELDS[k]] = v
        elif k in _ENV_FIELDS:
            if v:
                env[_ENV_FIELDS[k]] = v
        else:
            out.setdefault(k, v)
    if sdk:
        out["sdkInfo"] = sdk
    if env:
        out["envInfo"] = env
    return out


def _login_html(id: str, error: str | None, status: int = 200, headers: dict | None = None) -> Response:
    err = f'<p class="error">{html.escape(error)}</p>' if error else ""
    page = (f"<!DOCTYPE html><html><head><title>Login</title></head><body><form method=\"POST\""
            f" action=\"/oidc/login/password\"><input type=\"hidden\" name=\"id\" value=\"{html.escape(id)}\">"
            f"<label>Username <input name=\"username\"></label><label>Password <input type=\"password\""
            f" name=\"password\"></label><button type=\"submit\">Login</button>{err}</form></body></html>")
    return HTMLResponse(page, status_code=status, headers=headers)


Handler = Callable[["Provider", Request], Coroutine[Any, Any, Response]]   # a route's handler
