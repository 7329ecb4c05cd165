"""``lastChangeAt`` of ``/current-api-session/service-updates``: when the caller's service list
(its services, their configs, their posture) may last have changed.

Stamps live in ``service_change_stamps`` and are written in the transaction of the change:
scope ``''`` for changes that can concern every identity (services, configs, config types,
service policies, posture checks), an identity's id for its own (its role attributes). Posture
responses move the identity's stamp in memory (posture data is volatile). The identity's
service-config overrides are compared with what was seen last, when the caller lists its
services or asks for updates, so a change there moves the stamp too whichever code wrote it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from .. import clock
from ..api import crud
from ..api.context import Ctx
from ..resources.identities import IDENTITIES
from ..resources.policies import SERVICE_POLICIES
from ..resources.posture import POSTURE_CHECKS
from ..resources.services import CONFIG_TYPES, CONFIGS, SERVICES

if TYPE_CHECKING:
    from .sessions import ClientController

GLOBAL = ""
EVERYONE = (SERVICES, CONFIGS, CONFIG_TYPES, SERVICE_POLICIES, POSTURE_CHECKS)

_UPSERT = ("INSERT INTO service_change_stamps (scope, changed_at) VALUES (?, ?)"
           " ON CONFLICT(scope) DO UPDATE SET changed_at = max(changed_at, excluded.changed_at)")


def bump(store, scope: str = GLOBAL) -> None:
    store.execute(_UPSERT, (scope, clock.stamp()))


def _everyone(ctx: Ctx, id, before, values) -> None:
    bump(ctx.store)


def _identity(ctx: Ctx, id, before, values) -> None:
    """An identity's role attributes decide its policies (a new identity has no API session
    yet, so there is nothing to tell it)."""
    if values is None:
        ctx.store.execute("DELETE FROM service_change_stamps WHERE scope = ?", (id,))
    elif before is not None and "role_attributes" in values:
        bump(ctx.store, id)


for _res in EVERYONE:
    crud.listen(_res)(_everyone)
crud.listen(IDENTITIES)(_identity)


def memory_bump(ctl: ClientController, identity_id: str) -> None:
    ctl.service_change_memory[identity_id] = clock.stamp()


def observe_overrides(ctl: ClientController, identity_id: str) -> None:
    """Move the identity's stamp when its service-config overrides differ from last time."""
    rows = ctl.store.conn.execute(
        "SELECT service_id, config_type_id, config_id FROM identity_service_configs WHERE identity_id = ?"
        " ORDER BY service_id, config_type_id", (identity_id,)).fetchall()
    sig = hashlib.sha1(repr(rows).encode()).hexdigest() if rows else ""
    seen = ctl.service_override_sigs
    before = seen.get(identity_id)
    seen[identity_id] = sig
    if before is not None and before != sig:
        memory_bump(ctl, identity_id)


def last_change_at(ctx: Ctx) -> str:
    """The latest stamp concerning the caller, never earlier than its API session."""
    ctl, sess = ctx.ctl, ctx.api_session
    observe_overrides(ctl, sess.identity_id)
    created = ctx.store.value("SELECT created_at FROM api_sessions WHERE id = ?", (sess.id,)) or ""
    stored = ctx.store.value("SELECT max(changed_at) FROM service_change_stamps WHERE scope IN (?, ?)",
                             (GLOBAL, sess.identity_id)) or ""
    memory = ctl.service_change_memory.get(sess.identity_id, "")
    return max(created, stored, memory)
