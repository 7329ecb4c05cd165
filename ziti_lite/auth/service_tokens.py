"""Service-access tokens: the JWT a session's ``token`` is, as OpenZiti v2.0 mints it.

A v2.0 router verifies every Bind (and a JWT Dial) itself, with the public keys of the router
data model, before it asks the controller: the session token must be a JWT signed with the
controller's TLS server key (``kid`` the server certificate's SHA-1, as the OIDC tokens), naming
the service (``sub``), the session (``jti``), its API session (``z_asid``, compared with the
hello's), the identity (``z_iid``), ``z_t`` = ``s`` and the session type (``z_st``); ``z_leg``
says whether the API session is a legacy one. Older routers and SDKs treat the token as opaque
and hand it back to the controller, which finds the session by it as before: the JWT is stored
as the session's ``token``, so every lookup by token (embedded router, control channel, sync)
stays one indexed read (``shared/reference/behaviour/ctrl-channel-v2.md`` §3.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import clock
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
