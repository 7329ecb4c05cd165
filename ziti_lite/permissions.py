"""OpenZiti 2.0's permission model: the names an identity's ``permissions`` may hold, and the rule
that decides whether a caller may run an operation that needs ``(entity, action)``.

Why a module of its own, at the bottom: the names are validated where identities are written
(``resources/identities.py``), declared on routes (``api/router.py``), checked on every request
(``app.Controller.authorize``) and read by tools (``netcode``); all of them share this one table.

The rule, as upstream v2.0.3 decides it for the management API:

* ``isAdmin`` (or the default admin) may do everything;
* ``admin_readonly`` may run every operation whose action is ``read``;
* the entity permission (``service``) allows every action on that entity;
* the action permission (``service.read``) allows that action only.

Permissions add up. An operation with no ``(entity, action)`` (the database, the summary, the
fabric API's routers, services and terminators) is for admins only, and so, in effect, is one
whose entity no identity can hold (``authenticator``, ``controller``: admins, and ``admin_readonly``
for reads).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

ADMIN_READONLY = "admin_readonly"
OPS = "ops"   # API sessions, sessions, circuits, links, the event streams
ACTIONS = ("read", "create", "update", "delete")

# the entities a permission may name, in upstream's order (its enum of ``permissions`` items);
# ``ops`` has no create action upstream
ENTITIES: tuple[str, ...] = (
    "auth-policy", "ca", "config", "config-type", "edge-router-policy", "enrollment", "external-jwt-signer",
    "identity", OPS, "posture-check", "router", "service", "service-edge-router-policy", "service-policy",
    "terminator",
)
# entities an operation may need that no identity can be given (admins only, admin_readonly reads)
UNGRANTABLE = ("authenticator", "controller", "revocation")


def _allowed() -> tuple[str, ...]:
    out = [ADMIN_READONLY]
    for entity in ENTITIES:
        out.append(entity)
        out.extend(f"{entity}.{a}" for a in ACTIONS if not (entity == OPS and a == "create"))
    return tuple(out)


# what the event streams need (``/fabric/v1/ws-api``, ``/ziti-lite/v1/events``): admins and the
# ``ops`` entity permission only, as upstream's ws-api (``ops.stream`` is no holdable name, so
# neither ``admin_readonly`` nor an ``ops.*`` action permission allows it)
STREAM = (OPS, "stream")

# every value ``permissions`` accepts, in the order upstream's validation error lists them
ALLOWED: tuple[str, ...] = _allowed()
_ALLOWED_SET = frozenset(ALLOWED)

# what an operation needs: (entity, action), or None for admins only
Need = tuple[str, str] | None


def unknown(values: Iterable[str]) -> tuple[int, str] | None:
    """The index and value of the first name that is not a permission, or None."""
    for i, v in enumerate(values):
        if v not in _ALLOWED_SET:
            return i, v
    return None


def allows(is_admin: bool, held: frozenset[str], need: Need) -> bool:
    """Whether a caller (``isAdmin``, ``held`` permissions) may run an operation needing ``need``."""
    if is_admin:
        return True
    if need is None or not held:
        return False
    entity, action = need
    return ((action == "read" and ADMIN_READONLY in held)
            or entity in held or f"{entity}.{action}" in held)


def granting(need: Need) -> list[str]:
    """The permissions any one of which allows ``need`` (for error messages and ``ziti-lite why``):
    empty when only an admin may."""
    if need is None:
        return []
    entity, action = need
    out = [ADMIN_READONLY] if action == "read" else []
    if entity not in UNGRANTABLE:
        out += [entity, f"{entity}.{action}"]
    return [p for p in out if p in _ALLOWED_SET]


def label(need: Need) -> str:
    """The text of a need: ``service.read``, or ``admin`` for admins only."""
    return "admin" if need is None else f"{need[0]}.{need[1]}"


def parse(text: str | None) -> frozenset[str]:
    """The stored JSON array of an identity's permissions as a set (malformed text: none)."""
    if not text or text == "[]":
        return frozenset()
    try:
        value = json.loads(text)
    except ValueError:
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) else frozenset()
