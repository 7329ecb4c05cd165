"""What a router of either kind asks the database before it lets traffic through.

Upstream's router forwards a client's tokens and certificate fingerprints to the controller,
which checks them (create_circuit / create_terminator in the v1.3.3 controller). Here the
router and the controller share one SQLite file, so every check is one short query on the
router's thread (through its own connection): the hello's API session and certificate, the
session token of a Connect or Bind, the policies that let the identity use this router for the
service. ``reconcile`` is the batch form that the router runs twice a second to find what was
revoked meanwhile. The control channel asks the same of a real router's requests
(``router_session``, ``allowed``, ``reconcile``): one set of rules for both kinds of router.

A hello may carry an OIDC access token instead of an API-session token (newer SDKs); it then
stands for the API session row it names, with the same certificate check (or one of the
certificates its login presented, ``z_cfs``, as upstream's router checks).

Error texts are the ones SDKs react to: ``Invalid Session`` exactly (C SDK 0.29 then fetches a
new session and retries); the rest follow the controller's wording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from ..auth import oidc_tokens, sessions
from ..auth.sessions import AuthController
from ..policy.model import identity_router_ids, service_router_ids


class RoutingController(AuthController, Protocol):
    """The controller as the routing checks see it (see ``lifecycle.contexts.LifecycleController``)."""
    @property
    def oidc(self) -> object | None: ...    # the OIDC provider, None with --no-oidc


INVALID_SESSION = "Invalid Session"
INVALID_API_SESSION = "invalid api session"
WRONG_TYPE = "incorrect session type"
WRONG_ROUTER = "invalid edge router for session"
INVALID_SERVICE = "invalid service"
ENCRYPTION_MISSING = "encryption required on service, initiator did not send public header"

_CERT_OWNER = (
    "SELECT 1 FROM authenticators WHERE identity_id = ? AND fingerprint = ?"
    " UNION ALL SELECT 1 FROM api_session_certificates WHERE api_session_id = ? AND fingerprint = ?"
    " LIMIT 1")

_SESSION = (
    "SELECT s.id, s.token, s.type, s.api_session_id, s.identity_id, s.service_id,"
    " v.name AS service_name, v.encryption_required, v.terminator_strategy, i.name AS identity_name,"
    " i.default_hosting_cost, i.default_hosting_precedence, i.service_hosting_costs,"
    " i.service_hosting_precedences"
    " FROM sessions s JOIN services v ON v.id = s.service_id JOIN identities i ON i.id = s.identity_id"
    " WHERE s.token = ?")

# the identity may use this router for this service: an edge router policy and a service edge
# router policy both select the router, and a service policy of the session's type still links
# the identity to the service
_ALLOWED = (
    f"SELECT EXISTS ({identity_router_ids('?1')} AND r.router_id = ?3)"
    f" AND EXISTS ({service_router_ids('?2')} AND r.router_id = ?3)"
    " AND EXISTS (SELECT 1 FROM service_policy_identities i JOIN service_policy_services s"
    "  ON s.policy_id = i.policy_id AND s.type = ?4 WHERE i.identity_id = ?1 AND s.service_id = ?2)")


@dataclass(slots=True)
class ApiSession:
    id: str
    token: str
    identity_id: str
    identity_name: str


@dataclass(slots=True)
class Session:
    id: str
    token: str
    type: str
    api_session_id: str
    identity_id: str
    identity_name: str
    service_id: str
    service_name: str
    encryption_required: bool
    terminator_strategy: str
    hosting_cost: int
    hosting_precedence: str


def hello(ctl: RoutingController, token: str, fingerprint: str | None) -> ApiSession | None:
    """The API session of a hello, or None when the token, the identity or the client's
    certificate does not qualify (the router then closes the channel)."""
    if not fingerprint:
        return None
    presented: list = []    # certificates an OIDC token names (z_cfs: those shown at its login)
    if token.count(".") == 2 and ctl.oidc is not None:
        # an OIDC access token (newer SDKs): checked against the controller's key and the
        # revocation list, then it stands for the API session row it names
        try:
            claims = oidc_tokens.verify_access(ctl, token)
        except oidc_tokens.Rejected:
            return None
        row = oidc_tokens.session_row(ctl, claims)
        if row is None:
            return None
        token = row["token"]
        presented = claims.get("z_cfs") or []
    s = sessions.lookup(ctl, token)
    if s is None or s.partial:
        return None
    store = ctl.store
    owned = store.value(_CERT_OWNER, (s.identity_id, fingerprint, s.id, fingerprint)) is not None
    if not owned and fingerprint not in presented:
        return None
    name = store.value("SELECT name FROM identities WHERE id = ?", (s.identity_id,)) or ""
    return ApiSession(s.id, token, s.identity_id, name)


def session(ctl: RoutingController, token: str, kind: str, api_session_id: str,
            router_id: str) -> tuple[Session | None, str]:
    """The session of a Connect (``Dial``) or Bind body, or (None, error text)."""
    row = ctl.store.one(_SESSION, (token,)) if token else None
    if row is None:
        return None, INVALID_SESSION
    if row["api_session_id"] != api_session_id:
        return None, INVALID_SESSION  # a session of an earlier API session: the SDK fetches a new one
    if row["type"] != kind:
        return None, WRONG_TYPE
    if not allowed(ctl.store, row["identity_id"], row["service_id"], router_id, kind):
        return None, WRONG_ROUTER
    return _session(row), ""


def _session(row: dict) -> Session:
    costs = json.loads(row["service_hosting_costs"] or "{}")
    precedences = json.loads(row["service_hosting_precedences"] or "{}")
    sid = row["service_id"]
    return Session(
        row["id"], row["token"], row["type"], row["api_session_id"], row["identity_id"], row["identity_name"],
        sid, row["service_name"], bool(row["encryption_required"]), row["terminator_strategy"] or "smartrouting",
        int(costs.get(sid, row["default_hosting_cost"]) or 0),
        str(precedences.get(sid, row["default_hosting_precedence"]) or "default"),
    )


# the edge error codes a controller answers a router with (header 1014), by error text
ERROR_CODES = {INVALID_API_SESSION: 2, INVALID_SESSION: 3, WRONG_TYPE: 4, WRONG_ROUTER: 5, INVALID_SERVICE: 6,
               ENCRYPTION_MISSING: 11}


def router_session(ctl: RoutingController, token: str, kind: str, fingerprints: list[str],
                   router_id: str) -> tuple[Session | None, str]:
    """The session a real router presents for a Bind or Dial, checked as upstream's controller
    checks it (create_terminator / create_circuit): it exists, is of ``kind``, one of the
    client's certificate ``fingerprints`` belongs to its identity or API session, and the
    policies let the identity use this router for the service. Else (None, error text)."""
    row = ctl.store.one(_SESSION, (token,)) if token else None
    if row is None:
        return None, INVALID_SESSION
    if row["type"] != kind:
        return None, WRONG_TYPE
    store = ctl.store
    if not any(store.value(_CERT_OWNER, (row["identity_id"], fp, row["api_session_id"], fp)) for fp in fingerprints):
        return None, INVALID_API_SESSION
    if not allowed(store, row["identity_id"], row["service_id"], router_id, kind):
        return None, WRONG_ROUTER
    return _session(row), ""


def allowed(store, identity_id: str, service_id: str, router_id: str, kind: str) -> bool:
    return bool(store.value(_ALLOWED, (identity_id, service_id, router_id, kind)))


@dataclass
class Revoked:
    api_sessions: set[str]
    sessions: set[str]
    terminators: set[str]


def reconcile(ctl: RoutingController, router_id: str, api_session_ids: set[str], live: dict[str, tuple[str, str, str]],
              terminator_ids: set[str]) -> Revoked:
    """Which of the live API sessions, sessions and terminators have gone or lost their right.

    ``live`` maps session id -> (identity id, service id, type) for every session that carries
    a connection or a terminator. An API session is gone when its row is, or when its identity
    is disabled; a session when its row is, or when the policies no longer allow it."""
    store = ctl.store
    now = store.value("SELECT zl_now()")
    ok = set(store.column(
        "SELECT a.id FROM api_sessions a JOIN identities i ON i.id = a.identity_id"
        " WHERE a.id IN (SELECT value FROM json_each(?))"
        " AND (i.disabled_at IS NULL OR (i.disabled_until IS NOT NULL AND i.disabled_until <= ?))",
        (json.dumps(sorted(api_session_ids)), now))) if api_session_ids else set()
    present = set(store.column("SELECT id FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                               (json.dumps(sorted(live)),))) if live else set()
    gone = set(live) - present
    verdicts: dict[tuple[str, str, str], bool] = {}
    for sid in present:
        key = live[sid]
        if key not in verdicts:
            verdicts[key] = allowed(store, key[0], key[1], router_id, key[2])
        if not verdicts[key]:
            gone.add(sid)
    kept_terms = set(store.column(
        "SELECT id FROM terminators WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(terminator_ids)),))) if terminator_ids else set()
    return Revoked(api_session_ids - ok, gone, terminator_ids - kept_terms)
