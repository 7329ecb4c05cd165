"""Service-access tokens: the JWT a session's ``token`` is where v2.0 routers may carry it.

A v2.0 router verifies every Bind (and a JWT Dial) itself, with the public keys of the router
data model, before it asks the controller: the session token must be a JWT signed with the
controller's TLS server key (``kid`` the server certificate's SHA-1, as the OIDC tokens), naming
the service (``sub``), the session (``jti``), its API session (``z_asid``, compared with the
hello's), the identity (``z_iid``), ``z_t`` = ``s`` and the session type (``z_st``); ``z_leg``
says whether the API session is a legacy one. Older routers and SDKs treat the token as opaque
and hand it back to the controller, which finds the session by it as before: the JWT is stored
as the session's ``token``, so every lookup by token (embedded router, control channel, sync)
stays one indexed read (``shared/reference/behaviour/ctrl-channel-v2.md`` §3.1).

Where no v2.0 router may carry a session (no real router enrolled, or every one said since start
that it is of a v1.x line), sessions keep the opaque tokens of v1.3.3: v1.x routers close the
connections of a removed session only when its token is opaque (they leave a JWT session's to the
data model, which only v2.0 routers get here), so a v1-only network keeps upstream v1's behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import clock
from ..ids import new_token
from ..pki.tokens import sign_jwt
from .certs import server_keypair

if TYPE_CHECKING:
    from .sessions import AuthController

AUDIENCE = "openziti"
LIFETIME = 365 * 24 * 60 * 60     # upstream: a year, the API session bounds it
TYPE_SERVICE = "s"


def mint(ctl: AuthController, *, session_id: str, api_session_id: str, identity_id: str, service_id: str,
         kind: str, legacy: bool) -> str:
    """The token of one session (``kind``: ``Dial`` or ``Bind``)."""
    now = int(clock.now().timestamp())
    return sign_jwt(server_keypair(ctl), {
        "iss": ctl.settings.base_url.rstrip("/"), "sub": service_id, "aud": [AUDIENCE], "exp": now + LIFETIME,
        "iat": now, "jti": session_id, "z_asid": api_session_id, "z_iid": identity_id, "z_t": TYPE_SERVICE,
        "z_st": kind, "z_leg": legacy})


def real_router_lines(ctl: AuthController) -> list[str]:
    """The line (version) of each enrolled real router, as its last hello since start named it
    ('' for one not seen since start): the routers other than the embedded one."""
    gen = (ctl.store.generation(), tuple(sorted(ctl.router_lines.items())))
    known = _LINES.get(id(ctl))
    if known is None or known[0] != gen:
        embedded = ctl.state.get("edge_router_id") or ctl.store.value(
            "SELECT value FROM controller WHERE key = 'edge_router_id'")
        real = ctl.store.column("SELECT id FROM routers WHERE fingerprint IS NOT NULL AND id IS NOT ?", (embedded,))
        known = _LINES[id(ctl)] = (gen, [ctl.router_lines.get(rid, "") for rid in real])
    return known[1]


_LINES: dict[int, tuple[Any, list[str]]] = {}


def major(version: str) -> int:
    head = version.lstrip("v").split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def new(ctl: AuthController, **claims: Any) -> str:
    """A new session's token: its JWT where a v2.0 router (or one not seen since start) may carry
    it, else an opaque one (see the module's docstring)."""
    if any(major(line) >= 2 or not line for line in real_router_lines(ctl)):
        return mint(ctl, **claims)
    return new_token()
