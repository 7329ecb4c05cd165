"""The registries of ways to log in: primary methods (``POST /authenticate?method=``) and the
providers of a session's ``authQueries`` (the secondary factors it still owes).

``password`` registers in ``handlers/authentication.py``, ``cert`` in ``handlers/enrollment.py`` and
``ext-jwt`` in ``auth/extjwt.py``; TOTP's auth query in ``handlers/mfa.py`` and ext-jwt's in
``auth/extjwt.py``. Which modules are loaded is ``ziti_lite/wiring.py``'s list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ..api.context import Ctx
from .policy import policy_secondary


class Login(msgspec.Struct):
    """What a primary authentication method established."""
    identity_id: str
    authenticator_id: str
    cert_extendable: bool = False


Method = Callable[[Ctx, Any], Awaitable[Login]]
METHODS: dict[str, Method] = {}


def method(name: str) -> Callable[[Method], Method]:
    """Register a primary authentication method under its ``?method=`` name."""
    def deco(fn: Method) -> Method:
        METHODS[name] = fn
        return fn
    return deco


# functions told of every login attempt's outcome, as fn(ctx, method, login, api_session_id,
# error, username): login and api_session_id on success, error (the ApiError answered) on
# failure; username as the password method was given it (the audit trail and the
# ``authentication`` events, events/audit.py). They must not raise.
LoginOutcome = Callable[[Ctx, str, "Login | None", "str | None", "Exception | None", "str | None"], None]
LOGIN_OUTCOMES: list[LoginOutcome] = []


def on_login(fn: LoginOutcome) -> LoginOutcome:
    LOGIN_OUTCOMES.append(fn)
    return fn


def login_outcome(ctx: Ctx, method: str, login: Login | None, api_session_id: str | None,
                  error: Exception | None, username: str | None) -> None:
    for fn in LOGIN_OUTCOMES:
        fn(ctx, method, login, api_session_id, error, username)


# hooks that fill a session's authQueries (MFA, ext-jwt secondary); each gets the session row and
# the secondary rules of its identity's auth policy, and returns a list
AuthQueryProvider = Callable[[Ctx, dict, dict], list]
AUTH_QUERY_PROVIDERS: list[AuthQueryProvider] = []


def auth_queries(ctx: Ctx, row: dict) -> list:
    """The auth queries of the API session ``row``: every provider's, in registration order."""
    secondary = policy_secondary(ctx.store, row["identity_id"])  # read once for all providers
    out: list = []
    for provider in AUTH_QUERY_PROVIDERS:
        out.extend(provider(ctx, row, secondary))
    return out
