"""The controller's ``Bus`` as code on another thread's event loop sees it (the embedded router).

Subscribers (the events file, SSE and ws-api streams) belong to the controller's loop: their
``offer`` queues without locks. A producer on another loop therefore never publishes itself;
``ThreadBus`` hands each batch of events to the controller's loop with
``call_soon_threadsafe``, in the order emitted, and an event emitted inside a write of the
producer's own store still waits for that write's commit (``Store.after_commit``). What the
producer asks before building an event (``active``, ``wants``) reads the controller's bus, and
the hooks of ``on_active`` (the row triggers of the producer's store, ``tables.RowEvents``)
run on the producer's loop when the controller's bus gains its first or loses its last
subscriber, since they write through the producer's database connection.
"""

from __future__ import annotations

import asyncio
import contextlib

from .bus import Bus


class ThreadBus(Bus):
    def __init__(self, main: Bus, main_loop: asyncio.AbstractEventLoop, own_loop: asyncio.AbstractEventLoop):
        super().__init__(main.source_id)
        self.main = main
        self.main_loop = main_loop
        self.own_loop = own_loop
        main.on_active.append(self._main_toggled)

    @property
    def active(self) -> bool:
        return self.main.active

    def wants(self, namespace: str) -> bool:
        return self.main.wants(namespace)

    def _publish_all(self, events: list[dict]) -> None:
        """Publishing happens on the controller's loop (at the producer's commit, when in a write)."""
        with contextlib.suppress(RuntimeError):   # the controller's loop has closed: nobody listens
            self.main_loop.call_soon_threadsafe(self.main.emit_all, events)

    def _main_toggled(self) -> None:
        with contextlib.suppress(RuntimeError):   # the producer's loop has closed (close() comes next)
            self.own_loop.call_soon_threadsafe(self._toggled)

    def close(self) -> None:
        """Stop following the controller's bus (the producer's loop is about to close)."""
        with contextlib.suppress(ValueError):
            self.main.on_active.remove(self._main_toggled)
