"""What a connection may cost the server: deadlines, a cap, a quiet log, a fast goodbye.

The API port is open to whoever reaches the network, so every connection is bounded:

* **TLS handshake deadline** (``handshake_timeout``, upstream-like 5 s): a client that connects
  and never finishes the handshake is dropped (asyncio's ``ssl_handshake_timeout``; uvicorn
  does not expose it, so :class:`GuardedServer` passes it to ``create_server``).
* **Request deadline** (``idle_timeout``, 5 s as upstream's listener): a connection that has not
  sent a complete request head within that time of connecting, or of its last response, is
  aborted, whether it sends nothing or trickles bytes (slowloris). uvicorn's own keep-alive
  timer only starts after a first response and stops at the first byte received.
* **A cap on open connections** (``max_connections``, by default three quarters of the file
  descriptor limit, minus a reserve for the database and logs): when it is reached, the
  connection that has waited longest for a request is closed to make room; if every
  connection is busy with a request, the new one is closed. Either way one log line per minute,
  never a traceback per accept. Should ``accept()`` still run out of descriptors, asyncio's
  traceback per failed accept is replaced by one line per minute too.
* **Shutdown**: idle keep-alive connections are aborted at once instead of waiting up to 30 s
  for the client's TLS close_notify (asyncio's ``ssl_shutdown_timeout``, shortened too); the
  lifespan shutdown (final WAL checkpoint) follows within a second or two.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time

import uvicorn

log = logging.getLogger("ziti_lite.connections")

RESERVED_FDS = 64          # the database, its WAL, logs, worker threads' files
SSL_SHUTDOWN_TIMEOUT = 1.0  # seconds to wait for a peer's close_notify
LOG_EVERY = 60.0            # seconds between two lines about the same overload


def default_max_connections() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(8, min(10000, (soft - RESERVED_FDS) * 3 // 4))


class _Quiet:
    """Log a line about one kind of overload at most once per ``LOG_EVERY`` seconds."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.suppressed: dict[str, int] = {}

    def warn(self, key: str, message: str, *args) -> None:
        now = time.monotonic()
        if now - self.last.get(key, -LOG_EVERY) < LOG_EVERY:
            self.suppressed[key] = self.suppressed.get(key, 0) + 1
            return
        skipped = self.suppressed.pop(key, 0)
        self.last[key] = now
        log.warning(message + (f" ({skipped} more since the last report)" if skipped else ""), *args)


class Limits:
    def __init__(self, idle_timeout: float = 5.0, handshake_timeout: float = 5.0,
                 max_connections: int | None = None):
        self.idle_timeout = float(idle_timeout)
        self.handshake_timeout = float(handshake_timeout)
        self.max_connections = int(max_connections or default_max_connections())
        self.quiet = _Quiet()


class GuardMixin:
    """Mixed into uvicorn's HTTP protocol class (see :func:`protocol_class`)."""

    limits: Limits
    _zl_timer = None
    _zl_armed = None
    _zl_waiting_since = 0.0

    # -- the request deadline ---------------------------------------------------------------
    def _zl_arm(self) -> None:
        if self._zl_timer is not None:
            self._zl_timer.cancel()
        self._zl_armed = self.cycle
        self._zl_waiting_since = self.loop.time()
        self._zl_timer = self.loop.call_later(self.limits.idle_timeout, self._zl_expire)

    def _zl_expire(self) -> None:
        self._zl_timer = None
        # a new request head arrived since arming: its own response re-arms the deadline
        if self.cycle is self._zl_armed and self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _zl_waiting(self) -> bool:
        """True while the connection waits for (the rest of) a request head."""
        return self._zl_timer is not None and self.cycle is self._zl_armed

    # -- uvicorn's protocol interface ------------------------------------------------------
    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[misc]
        self._zl_arm()
        limits = self.limits
        if len(self.connections) > limits.max_connections:
            waiting = [c for c in self.connections if c is not self and isinstance(c, GuardMixin) and c._zl_waiting()]
            if waiting:
                victim = min(waiting, key=lambda c: c._zl_waiting_since)
                limits.quiet.warn("cap", "connection limit %d reached: closing connections that send no request",
                                  limits.max_connections)
            else:
                victim = self
                limits.quiet.warn("cap", "connection limit %d reached and every connection is busy: refusing new ones",
                                  limits.max_connections)
            victim.transport.abort()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._zl_arm()

    def connection_lost(self, exc) -> None:
        if self._zl_timer is not None:
            self._zl_timer.cancel()
            self._zl_timer = None
        super().connection_lost(exc)  # type: ignore[misc]

    def shutdown(self) -> None:
        idle = self.cycle is None or self.cycle.response_complete
        super().shutdown()  # type: ignore[misc]
        if idle and self.transport is not None:
            self.transport.abort()  # nothing to flush: do not wait for the client's close_notify


def protocol_class(base: type, limits: Limits) -> type:
    """``base`` (a uvicorn HTTP protocol class) with the deadlines and the cap of ``limits``."""
    return type("Guarded" + base.__name__, (GuardMixin, base), {"limits": limits})


class GuardedServer(uvicorn.Server):
    """uvicorn's server with the TLS handshake and shutdown deadlines asyncio offers but uvicorn
    does not pass, and accept() failures logged as one line a minute."""

    limits: Limits

    async def startup(self, sockets=None) -> None:
        loop = asyncio.get_running_loop()
        self._zl_install_exception_handler(loop)
        original = loop.create_server
        limits = self.limits

        async def create_server(*args, **kw):
            if kw.get("ssl") is not None:
                kw.setdefault("ssl_handshake_timeout", limits.handshake_timeout)
                kw.setdefault("ssl_shutdown_timeout", SSL_SHUTDOWN_TIMEOUT)
            return await original(*args, **kw)

        try:
            loop.create_server = create_server  # type: ignore[method-assign]
        except AttributeError:  # a loop implementation that does not allow it: asyncio's defaults
            log.warning("TLS handshake deadline not installed on %s", type(loop).__name__)
            return await super().startup(sockets)
        try:
            await super().startup(sockets)
        finally:
            del loop.create_server

    def _zl_install_exception_handler(self, loop) -> None:
        quiet = self.limits.quiet
        previous = loop.get_exception_handler()

        def handler(loop, context):
            message = str(context.get("message", ""))
            if message.startswith("socket.accept() out of system resource"):
                exc = context.get("exception")
                quiet.warn("accept", "accept() failed (%s): new connections wait until descriptors are free", exc)
                return
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)
