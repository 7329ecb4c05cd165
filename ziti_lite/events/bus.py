"""The event bus: one per controller; producers ``emit`` event dicts, subscribers receive each
event once, already encoded, if its namespace is one they asked for.

Emitting never blocks and never raises into the producer: a subscriber must only queue (the file
sink's writer thread and each SSE stream drain their own bounded queues) and count what it has
to drop. An event emitted inside a database write is held until that write commits and dropped
if it rolls back (``Store.after_commit``), so nothing announces a change the file does not hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

log = logging.getLogger("ziti_lite.events")

# upstream's namespaces (v1.3.3, ``authentication`` from its later releases), as
# ``--events-types`` and the SSE ``types`` parameter name them
NAMESPACES = ("entityChange", "edge.apiSessions", "edge.sessions", "fabric.circuits", "fabric.terminators",
              "fabric.routers", "sdk", "edge.entityCounts", "authentication")

_enc = msgspec.json.Encoder()


def parse_types(text: str | Iterable[str] | None) -> frozenset[str] | None:
    """Namespaces from ``a,b,c`` (None or empty: all). Raises ValueError naming an unknown one."""
    if text is None:
        return None
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t and t.strip()]
    if not items or "all" in items:
        return None
    unknown = [t for t in items if t not in NAMESPACES]
    if unknown:
        raise ValueError(f"unknown event type {unknown[0]!r} (known: {', '.join(NAMESPACES)})")
    return frozenset(items)


class Subscriber:
    """Somewhere events go. ``offer`` is called on the event loop's thread for every event of a
    wanted namespace and must return at once: True when taken, False when dropped."""

    types: frozenset[str] | None = None   # None: every namespace

    def offer(self, namespace: str, line: bytes, event: dict) -> bool:
        raise NotImplementedError


class Bus:
    def __init__(self, source_id: str):
        self.source_id = source_id        # event_src_id of every event: the controller's id
        self.subscribers: list[Subscriber] = []
        self.emitted: dict[str, int] = {}
        self.dropped: dict[str, int] = {}  # subscriber kind ("file", "sse") -> events dropped
        self._reported = 0                 # drops already logged
        self._reported_at = 0.0
        self.tickets: dict[str, tuple[str, float]] = {}  # SSE ticket -> (API session id, monotonic expiry)
        self.on_active: list[Callable[[], None]] = []  # called when the first subscriber comes, the last goes
        self.sink: Any = None               # the --events file while serving (runtime.py)
        self.tasks: list[Any] = []          # entity counts and housekeeping while serving (runtime.py)
        self._wanted: frozenset[str] = frozenset()   # namespaces some subscriber takes (kept by _toggled)

    @property
    def active(self) -> bool:
        """Whether anything listens: producers skip building events nobody reads."""
        return bool(self.subscribers)

    def wants(self, namespace: str) -> bool:
        """Whether a subscriber takes ``namespace`` (a set lookup: every write asks)."""
        return namespace in self._wanted

    def subscribe(self, sub: Subscriber) -> None:
        self.subscribers.append(sub)
        self.rewant()
        if len(self.subscribers) == 1:
            self._toggled()

    def unsubscribe(self, sub: Subscriber) -> None:
        if sub in self.subscribers:
            self.subscribers.remove(sub)
            self.rewant()
            if not self.subscribers:
                self._toggled()

    def rewant(self) -> None:
        """Recompute what the subscribers take (after one changed its ``types``)."""
        wanted: set[str] = set()
        for s in self.subscribers:
            wanted.update(NAMESPACES if s.types is None else s.types)
        self._wanted = frozenset(wanted)

    def end_streams(self) -> None:
        """End every live stream (SSE, ws-api): the server is shutting down."""
        for sub in list(self.subscribers):
            end = getattr(sub, "end", None)
            if end is not None:
                end()

    def _toggled(self) -> None:
        for fn in self.on_active:
            fn()

    def emit(self, event: dict, store: Any = None) -> None:
        """Publish ``event`` (a dict with ``namespace``); inside a write of ``store``, at its commit."""
        self.emit_all([event], store)

    def emit_all(self, events: list[dict], store: Any = None) -> None:
        """``emit`` each of ``events``, in order, with one commit hook for all of them."""
        if not self.active:
            return
        if store is not None:
            store.after_commit(lambda: self._publish_all(events))
        else:
            self._publish_all(events)

    def _publish_all(self, events: list[dict]) -> None:
        for e in events:
            self._publish(e)

    def _publish(self, event: dict) -> None:
        namespace = event["namespace"]
        subs = [s for s in self.subscribers if s.types is None or namespace in s.types]
        if not subs:
            return
        try:
            line = _enc.encode(event)
        except Exception:  # a producer bug must not break the write that emitted
            log.exception("event %s could not be encoded", namespace)
            return
        self.emitted[namespace] = self.emitted.get(namespace, 0) + 1
        for sub in subs:
            try:
                taken = sub.offer(namespace, line, event)
            except Exception:
                log.exception("event subscriber %r failed", sub)
                taken = False
            if not taken:
                kind = getattr(sub, "kind", "other")
                self.dropped[kind] = self.dropped.get(kind, 0) + 1

    def report_drops(self, every: float = 60.0, now: Callable[[], float] = time.monotonic) -> bool:
        """Log the events dropped since the last report, at most once per ``every`` seconds."""
        total = sum(self.dropped.values())
        t = now()
        if total > self._reported and t - self._reported_at >= every:
            log.warning("events: %d dropped since the last report (%s in all); a sink is slow or full",
                        total - self._reported, ", ".join(f"{k}: {v}" for k, v in sorted(self.dropped.items())))
            self._reported, self._reported_at = total, t
            return True
        return False
