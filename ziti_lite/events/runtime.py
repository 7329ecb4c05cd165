"""What runs beside a serving controller for events and audit: the events file (``--events``),
``edge.entityCounts`` every ``--events-counts-interval`` seconds, and once a minute the audit
retention and the report of dropped events. ``app.create_app``'s lifespan starts and stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

from ..auth.sessions import AuthController
from . import audit, shapes
from .bus import parse_types
from .sinks import FileSink

if TYPE_CHECKING:
    from ..api.context import Ctx
    from ..api.router import AuthLevel
    from .bus import Bus

log = logging.getLogger("ziti_lite.events")


class EventsController(AuthController, Protocol):
    """The controller as the events modules see it (see ``lifecycle.contexts.LifecycleController``)."""
    events: Bus

    async def authorize(self, ctx: Ctx, level: AuthLevel) -> None: ...

# upstream's entity types (edge.entityCounts keys) and their tables
COUNTED = {
    "apiSessions": "api_sessions", "authPolicies": "auth_policies", "authenticators": "authenticators",
    "cas": "cas", "configTypes": "config_types", "configs": "configs", "edgeRouterPolicies": "edge_router_policies",
    "enrollments": "enrollments", "externalJwtSigners": "external_jwt_signers", "identities": "identities",
    "identityTypes": "identity_types", "postureCheckTypes": "posture_check_types", "postureChecks": "posture_checks",
    "routers": "routers", "serviceEdgeRouterPolicies": "service_edge_router_policies",
    "servicePolicies": "service_policies", "services": "services", "sessions": "sessions",
    "terminators": "terminators",
}


def entity_counts(store: Any) -> dict:
    counts: dict[str, int] = {}
    error = ""
    try:
        for etype, table in COUNTED.items():
            counts[etype] = store.value(f"SELECT count(*) FROM {table}")
    except Exception as e:   # reported in the event, as upstream does
        error = str(e)
    return {"counts": counts, "error": error}


async def _counts_loop(ctl: EventsController) -> None:
    interval = ctl.settings.events_counts_interval
    while True:
        await asyncio.sleep(interval)
        bus = ctl.events
        if bus.wants("edge.entityCounts"):
            got = entity_counts(ctl.store)
            bus.emit(shapes.entity_counts(bus.source_id, got["counts"], got["error"]))


async def _minutely(ctl: EventsController) -> None:
    while True:
        try:
            ctl.events.report_drops()
            s = ctl.settings
            if s.audit_days > 0:
                gone = audit.prune(ctl.store, s.audit_days, s.audit_max_rows)
                if gone:
                    log.info("audit: %d rows past retention deleted", gone)
        except Exception:
            log.exception("events/audit housekeeping")
        await asyncio.sleep(60)


def start(ctl: EventsController) -> None:
    s = ctl.settings
    sink = None
    if s.events:
        sink = FileSink(s.events, parse_types(s.events_types), max_bytes=int(s.events_max_mb * (1 << 20)),
                        keep=s.events_keep, limit=s.events_queue)
        sink.start()
        ctl.events.subscribe(sink)
    ctl.events.tasks = [asyncio.create_task(_counts_loop(ctl)), asyncio.create_task(_minutely(ctl))]
    ctl.events.sink = sink


async def stop(ctl: EventsController) -> None:
    bus = ctl.events
    for task in bus.tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    bus.tasks = []
    if bus.sink is not None:
        bus.unsubscribe(bus.sink)
        await asyncio.to_thread(bus.sink.close)
        bus.sink = None
