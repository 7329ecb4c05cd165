"""Events read from the rows themselves: API sessions, sessions and terminators are created and
deleted by many paths (logins, logouts, expiry, revocation, cascades of an identity's or a
service's deletion, the embedded router, a router's control channel), so their events come from
triggers on those three tables rather than from each path: temporary triggers of the
controller's connection (never in the file) that hand the row to ``zl_row_event``. A row seen
there is announced when its write commits (``Store.after_commit``).

Triggers rather than SQLite's pre-update hook: the hook calls into Python for every row any
write touches (a service create touches a dozen: link tables, the audit row), the triggers only
for the rows of these tables. They exist only while the bus has subscribers: without them a
write pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import shapes
from .bus import Bus

log = logging.getLogger("ziti_lite.events")

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


# the triggers of each table: (SQL event, ``op`` given to the builder, row image)
_TRIGGERS = {
    "api_sessions": (("INSERT", "created", "NEW"), ("DELETE", "deleted", "OLD")),
    "sessions": (("INSERT", "created", "NEW"), ("DELETE", "deleted", "OLD")),
    "terminators": (("INSERT", "created", "NEW"), ("DELETE", "deleted", "OLD"), ("UPDATE", "updated", "OLD")),
}


class RowEvents:
    """The row triggers of one store, present while ``bus`` has subscribers."""

    def __init__(self, store: Any, bus: Bus):
        self.store = store
        self.bus = bus
        self.installed = False
        self._columns: dict[str, tuple[str, ...]] = {}
        store.conn.create_scalar_function("zl_row_event", self._row, -1)

    def sync(self) -> None:
        """Create or drop the triggers as the bus gains its first or loses its last subscriber."""
        want = self.bus.active
        if want != self.installed:
            with self.store.write():   # never inside another thread's transaction on this connection
                self.store.conn.execute(self._create_sql() if want else self._drop_sql())
            self.installed = want

    def _names(self, table: str) -> tuple[str, ...]:
        names = self._columns.get(table)
        if names is None:
            names = self._columns[table] = tuple(r[1] for r in self.store.conn.execute(
                f"PRAGMA table_info({table})"))
        return names

    def _create_sql(self) -> str:
        out = []
        for table, triggers in _TRIGGERS.items():
            for event, op, image in triggers:
                values = ", ".join(f"{image}.{c}" for c in self._names(table))
                out.append(f"CREATE TEMP TRIGGER IF NOT EXISTS zl_event_{table}_{op} AFTER {event} ON main.{table}"
                           f" BEGIN SELECT zl_row_event('{table}', '{op}', {values}); END;")
        return "\n".join(out)

    def _drop_sql(self) -> str:
        return "\n".join(f"DROP TRIGGER IF EXISTS temp.zl_event_{table}_{op};"
                         for table, triggers in _TRIGGERS.items() for _, op, _ in triggers)

    def _row(self, table: str, op: str, *values: Any) -> None:
        """``zl_row_event(table, op, column values...)``, from the triggers: never raises into SQLite."""
        try:
            namespace, builder = TABLES[table]
            if not self.bus.wants(namespace):
                return
            row = dict(zip(self._columns[table], values))
            build = builder(self.bus, self.store, op, row)
            if build is not None:
                self.store.after_commit(lambda: self._publish(build))
        except Exception:  # the write goes on, the event is lost and logged
            log.exception("row event of %s", table)

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
