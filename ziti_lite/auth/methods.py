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
    # cert only: the client sent its leaf without the intermediate the chain needed (upstream's
    # improperClientCertChain of the API session)
    improper_chain: bool = False


Method = Callable[[Ctx, Any], Awaitable[Login]]
METHODS: dict[str, Method] = {}     # in rank order, whatever order their modules load in
_METHOD_RANKS: dict[str, int] = {}


def method(name: str, *, rank: int) -> Callable[[Method], Method]:
    """Register a primary authentication method under its ``?method=`` name. ``rank`` is its
    place wherever the methods are listed (the refusal of an unknown method names them in
    upstream's order: password, cert, ext-jwt)."""
    def deco(fn: Method) -> Method:
        _METHOD_RANKS[name] = rank
        METHODS[name] = fn
        ordered = sorted(METHODS.items(), key=lambda item: _METHOD_RANKS[item[0]])
        METHODS.clear()
        METHODS.update(ordered)
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
AUTH_QUERY_PROVIDERS: list[AuthQueryProvider] = []   # in rank order
_QUERY_RANKS: dict[AuthQueryProvider, int] = {}


def auth_query(*, rank: int) -> Callable[[AuthQueryProvider], AuthQueryProvider]:
    """Register a provider of auth queries; ``rank`` is the place of its queries in a session's
    ``authQueries`` (upstream lists MFA before EXT-JWT), whatever order the modules load in."""
    def deco(fn: AuthQueryProvider) -> AuthQueryProvider:
        _QUERY_RANKS[fn] = rank
        AUTH_QUERY_PROVIDERS.append(fn)
        AUTH_QUERY_PROVIDERS.sort(key=_QUERY_RANKS.__getitem__)
        return fn
    return deco


def auth_queries(ctx: Ctx, row: dict) -> list:
    """The auth queries of the API session ``row``: every provider's, in registration order."""
    secondary = policy_secondary(ctx.store, row["identity_id"])  # read once for all providers
    out: list = []
    for provider in AUTH_QUERY_PROVIDERS:
        out.extend(provider(ctx, row, secondary))
    return out
