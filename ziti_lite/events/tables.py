"""Events read from the rows themselves: API sessions, sessions and terminators are created and
deleted by many paths (logins, logouts, expiry, revocation, cascades of an identity's or a
service's deletion, the embedded router, a router's control channel), so their events come from
SQLite's pre-update hook on the controller's connection rather than from each path. A row seen
in the hook is announced when its write commits (``Store.after_commit``).

The hook is installed only while the bus has subscribers: without them a write pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import shapes
from .bus import Bus

log = logging.getLogger("ziti_lite.events")

_OPS = {"INSERT": "created", "DELETE": "deleted", "UPDATE": "updated"}


def _api_session(bus: Bus, store: Any, op: str, row: dict) -> Callable[[], dict | None] | None:
    if op == "updated":
        return None  # activity stamps and MFA flags: no upstream event
    return lambda: shapes.api_session(bus.source_id, op, row["id"], row["identity_id"], row["ip_address"])


def _session(bus: Bus, store: Any, op: str, row: dict) -> Callable[[], dict | None] | None:
    if op == "updated":
        return None
    return lambda: shapes.session(bus.source_id, op, row["id"], row["type"], row["api_session_id"],
                                  row["identity_id"], row["service_id"])


def _terminator(bus: Bus, store: Any, op: str, row: dict) -> Callable[[], dict | None] | None:
    def build() -> dict:
        counts = store.one(
            "SELECT count(*) AS total, coalesce(sum(precedence = 'default'), 0) AS d,"
            " coalesce(sum(precedence = 'required'), 0) AS r FROM terminators WHERE service_id = ?",
            (row["service_id"],)) or {"total": 0, "d": 0, "r": 0}
        return shapes.terminator(bus.source_id, op, row, row["router_id"] in store.online_routers,
                                 counts["total"], counts["d"], counts["r"])
    return build


# table -> (namespace, builder of the event of one row change)
TABLES = {
    "api_sessions": ("edge.apiSessions", _api_session),
    "sessions": ("edge.sessions", _session),
    "terminators": ("fabric.terminators", _terminator),
}


class RowEvents:
    """The pre-update hook of one store, on while ``bus`` has subscribers."""

    def __init__(self, store: Any, bus: Bus):
        self.store = store
        self.bus = bus
        self.installed = False
        self._columns: dict[str, tuple[str, ...]] = {}

    def sync(self) -> None:
        """Install or remove the hook as the bus gains its first or loses its last subscriber."""
        want = self.bus.active
        if want != self.installed:
            self.store.conn.preupdate_hook(self._hook if want else None, id="zl-events")
            self.installed = want

    def _names(self, table: str) -> tuple[str, ...]:
        names = self._columns.get(table)
        if names is None:
            names = self._columns[table] = tuple(r[1] for r in self.store.conn.execute(
                f"PRAGMA table_info({table})"))
        return names

    def _hook(self, update: Any) -> None:
        try:
            entry = TABLES.get(update.table_name)
            if entry is None or update.database_name != "main" or not self.bus.wants(entry[0]):
                return
            op = _OPS[update.op]
            values = update.new if op == "created" else update.old
            row = dict(zip(self._names_outside(update.table_name), values))
            build = entry[1](self.bus, self.store, op, row)
            if build is not None:
                self.store.after_commit(lambda: self._publish(build))
        except Exception:  # never into SQLite: the write goes on, the event is lost and logged
            log.exception("row event of %s", getattr(update, "table_name", "?"))

    def _names_outside(self, table: str) -> tuple[str, ...]:
        names = self._columns.get(table)
        if names is None:  # learnt before the hook is installed; never queried from inside it
            raise LookupError(f"columns of {table} not known")
        return names

    def _publish(self, build: Callable[[], dict | None]) -> None:
        event = build()
        if event is not None:
            self.bus.emit(event)

    def learn(self) -> None:
        for table in TABLES:
            self._names(table)


def watch(store: Any, bus: Bus) -> RowEvents:
    """The row events of ``store``, kept in step with ``bus``'s subscribers."""
    rows = RowEvents(store, bus)
    rows.learn()
    bus.on_active.append(rows.sync)
    rows.sync()
    return rows
