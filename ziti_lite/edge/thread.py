"""The embedded router on a thread and event loop of its own, beside the API's.

Why: on one loop, every burst of relayed frames (a thousand SDK channels sending at once)
runs to its end before the API's next request is read, so the API's latency followed the
router's traffic (``GET /version`` p99 0.8 ms alone, 4.7 ms while 1,000 channels sent 1 KiB
every 100 ms). On its own thread the router's work interleaves with the API's at every release
of the interpreter lock: 1.7-2.7 ms under the same traffic, where another API process on the
same 2-core box shows 0.8-0.9 ms. What remains is that lock: each of the router's TLS calls
releases it and takes it straight back, so an API thread that wakes during a burst of relayed
frames can wait out the burst (benchmarks/README.md, issue 25's fourth and fifth rounds).

What the router shares with the controller, and how:

* the database file, through a connection of its own (``Store``): a connection is used by one
  thread at a time, and a write of one thread must never run inside the other's transaction.
  Caches are per connection and keyed by its ``Store.generation``, which moves when the other
  connection commits, so each side sees the other's writes at its next read. The row triggers
  of events (``events/tables.py``) are installed on this connection too, by the router's loop.
* events: ``events/bridge.ThreadBus`` hands them to the controller's loop, in order.
* plain dictionaries and sets (API session activity, routers online, ext-jwt keys): single
  reads and writes, atomic under the interpreter lock; whoever iterates one takes a copy first.
* what the API reads of the router (``has_connection``, ``carries``, ``stats``) reads copies.

A database that is not a file (``:memory:``) cannot be opened twice: its router stays on the
API's loop, as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..db.store import Store
from ..events import tables
from ..events.bridge import ThreadBus
from ..events.bus import Bus

if TYPE_CHECKING:
    import socket

    from ..api.context import Ctx
    from ..api.router import AuthLevel
    from ..config import Settings
    from .controller import EdgeController
    from .router import EdgeRouter


def can_run_apart(ctl: EdgeController) -> bool:
    """Whether the database can be opened a second time (a file, not ``:memory:``)."""
    path = ctl.store.path
    return bool(path) and path != ":memory:" and not path.startswith("file:")


class RouterSide:
    """The controller as the router's thread sees it (an ``EdgeController``): its own database
    connection, session cache and event bus; the controller's settings, state and shared maps."""

    def __init__(self, ctl: EdgeController, main_loop: asyncio.AbstractEventLoop,
                 own_loop: asyncio.AbstractEventLoop):
        self._ctl = ctl
        self.settings: Settings = ctl.settings
        self.state: dict[str, str] = ctl.state
        self.instance_id: str = ctl.instance_id
        self.activity: dict[str, str] = ctl.activity
        self.extjwt_keys: dict[str, Any] = ctl.extjwt_keys
        self.router_states: dict[str, dict] = ctl.router_states
        self.router_lines: dict[str, str] = ctl.router_lines
        self.edge_ssl_context: ssl.SSLContext | None = ctl.edge_ssl_context
        self.edge_sock: socket.socket | None = ctl.edge_sock
        self.session_rows: Any = None
        self.oidc_verified: dict[str, dict] = {}
        self.store = Store(ctl.store.path, statistics=False)   # the API's connection keeps them
        self.store.online_routers = ctl.store.online_routers   # one set: filters and events see the same
        self._bus = ThreadBus(ctl.events, main_loop, own_loop)
        self.events: Bus = self._bus
        tables.watch(self.store, self._bus)

    @property
    def oidc(self) -> object | None:
        return self._ctl.oidc

    @property
    def edge_router(self) -> EdgeRouter | None:
        return self._ctl.edge_router

    @edge_router.setter
    def edge_router(self, router: EdgeRouter | None) -> None:
        self._ctl.edge_router = router

    async def authorize(self, ctx: Ctx, level: AuthLevel) -> None:
        raise RuntimeError("the router's thread serves no API requests")

    def close(self) -> None:
        self._bus.close()
        self.store.close()


class RouterThread:
    """Runs one ``EdgeRouter`` on its own thread and loop (of the API loop's kind: uvloop or asyncio's)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None

    async def start(self, ctl: EdgeController, make: Callable[[EdgeController], EdgeRouter]) -> EdgeRouter:
        """Start the thread; ``make(side)`` builds the router there, which then starts listening.
        Returns once it listens; what its start raised (OSError: the port) is raised here."""
        main = asyncio.get_running_loop()
        started: concurrent.futures.Future[EdgeRouter] = concurrent.futures.Future()
        self.thread = threading.Thread(target=self._run, args=(ctl, main, make, started),
                                       name="ziti-lite-edge-router", daemon=True)
        self.thread.start()
        return await asyncio.wrap_future(started)

    def _run(self, ctl: EdgeController, main: asyncio.AbstractEventLoop,
             make: Callable[[EdgeController], EdgeRouter], started: concurrent.futures.Future) -> None:
        loop = type(main)()   # a new loop of the same implementation
        loop.set_exception_handler(main.get_exception_handler())
        asyncio.set_event_loop(loop)
        self.loop = loop
        side: RouterSide | None = None
        try:
            side = RouterSide(ctl, main, loop)
            router = make(side)
            loop.run_until_complete(router.start(sock=ctl.edge_sock))
        except BaseException as e:
            started.set_exception(e)
        else:
            started.set_result(router)
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                if side is not None:
                    side.close()
                loop.close()

    async def stop(self, router: EdgeRouter) -> None:
        """Stop the router on its loop, then the loop and the thread."""
        loop, thread = self.loop, self.thread
        if loop is None or thread is None or loop.is_closed():
            return
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(router.stop(), loop))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join, 10)

    def call(self, fn: Callable[[], Any], timeout: float = 10) -> Any:
        """Run ``fn()`` on the router's loop and return its result (from any other thread)."""
        assert self.loop is not None

        async def run() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)
