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
* **TLS handshakes off the loop**: each handshake step runs in a small thread pool
  (:class:`_OffloopHandshake`), so 200 clients connecting at once do not stall the requests
  of the connected ones behind ~1 ms of RSA signature each.
* **One TLS layer on every event loop**: :func:`create_tls_server` is how every TLS listener
  (the API's, the embedded router's) is made: a plain TCP server of the running loop (asyncio's
  or uvloop's) whose connections get asyncio's own TLS protocol with the off-loop handshake, the
  handshake and shutdown deadlines and a read buffer shared by all connections of a thread
  (asyncio gives each its own 256 KiB one: 250 MiB for 1,000 idle router channels). The TLS
  behaviour (client chains, deadlines, flow control) is thereby the same on both loops.
* **Shutdown**: idle keep-alive connections are aborted at once instead of waiting up to 30 s
  for the client's TLS close_notify (asyncio's ``ssl_shutdown_timeout``, shortened too); the
  lifespan shutdown (final WAL checkpoint) follows within a second or two.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import os
import resource
import ssl
import threading
import time
from asyncio import sslproto
from collections.abc import Callable, Iterable
from typing import Any

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
    _zl_timer: asyncio.TimerHandle | None = None
    _zl_armed: object = None    # the request cycle current when the deadline was armed
    _zl_waiting_since = 0.0
    _zl_deadline = 0.0          # loop time at which a connection still waiting is aborted

    # what the mixin uses of the uvicorn protocol it is mixed into (declared only, not set here)
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any                  # uvicorn's RequestResponseCycle of the current request, or None
    connections: set

    # -- the request deadline ---------------------------------------------------------------
    def _zl_arm(self) -> None:
        # the deadline moves with every response, the timer only when it fires early: a
        # keep-alive client costs no timer cancel and re-schedule per request
        self._zl_armed = self.cycle
        now = self._zl_waiting_since = self.loop.time()
        self._zl_deadline = now + self.limits.idle_timeout
        if self._zl_timer is None:
            self._zl_timer = self.loop.call_at(self._zl_deadline, self._zl_expire)

    def _zl_expire(self) -> None:
        self._zl_timer = None
        if self.cycle is not self._zl_armed:
            return  # a new request head arrived since arming: its own response re-arms the deadline
        if self.loop.time() < self._zl_deadline:  # re-armed since this timer was set
            self._zl_timer = self.loop.call_at(self._zl_deadline, self._zl_expire)
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _zl_waiting(self) -> bool:
        """True while the connection waits for (the rest of) a request head."""
        return self._zl_timer is not None and self.cycle is self._zl_armed

    # -- uvicorn's protocol interface ------------------------------------------------------
    def connection_made(self, transport) -> None:
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

    def handle_websocket_upgrade(self) -> None:
        # the connection becomes a WebSocket (``/fabric/v1/ws-api``), owned by another protocol
        # object from now on: no request deadline applies to it any more
        if self._zl_timer is not None:
            self._zl_timer.cancel()
            self._zl_timer = None
        super().handle_websocket_upgrade()  # type: ignore[misc]

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
    does not pass, and accept() failures logged as one line a minute. ``before_shutdown``
    functions run as shutdown starts: responses that never end by themselves (event streams)
    end then instead of holding the graceful shutdown to its deadline."""

    limits: Limits
    before_shutdown: list[Callable[[], None]]

    async def shutdown(self, sockets=None) -> None:
        for fn in getattr(self, "before_shutdown", ()):
            try:
                fn()
            except Exception:
                log.exception("before shutdown")
        await super().shutdown(sockets)

    async def startup(self, sockets=None) -> None:
        loop = asyncio.get_running_loop()
        self._zl_install_exception_handler(loop)
        original = loop.create_server
        limits = self.limits

        async def create_server(protocol_factory, *args, ssl=None, **kw):
            # uvicorn's listener, and any other made while it starts (the lifespan's: the router)
            if ssl is None:
                return await original(protocol_factory, *args, **kw)
            handshake = kw.pop("ssl_handshake_timeout", None) or limits.handshake_timeout
            shutdown = kw.pop("ssl_shutdown_timeout", None) or SSL_SHUTDOWN_TIMEOUT
            return await create_tls_server(protocol_factory, ssl, *args, handshake_timeout=handshake,
                                           shutdown_timeout=shutdown, create_server=original, **kw)

        try:
            loop.create_server = create_server  # type: ignore[method-assign]
        except AttributeError:  # a loop implementation that does not allow it: its own TLS, asyncio's deadlines
            log.warning("TLS handshakes run on the event loop (%s), without ziti-lite's deadlines",
                        type(loop).__name__)
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


# ------------------------------------------------------------------ TLS handshakes off the loop
class _OffloopHandshake(sslproto.SSLProtocol):
    """asyncio's TLS protocol with each handshake step (``SSL_do_handshake``: the server's RSA
    signature, key exchange, the client chain check) run in a worker thread; CPython releases
    the GIL while OpenSSL works, so a burst of new connections no longer stalls requests on the
    loop. While a step runs the thread owns the memory BIOs: bytes, EOF and connection loss that
    arrive meanwhile are held back and applied, in order, once it is done."""

    # asyncio reads each connection into its own zero-filled 256 KiB buffer: resident memory for
    # as long as the connection lives (304 KiB an idle router channel), and above glibc's mmap
    # threshold, so each new connection paid an mmap, 64 page faults and an munmap on the loop.
    # The bytes read are copied into the connection's incoming BIO before the read returns, so
    # one buffer serves every connection of the thread's loop (get_buffer). asyncio's __init__
    # sizes its own buffer by the class's max_size (4 KiB, dropped at once); the instance's
    # max_size, what one SSLObject.read may return, is 64 KiB as before.
    max_size = 4 * 1024
    READ_SIZE = 256 * 1024      # the shared buffer: up to 16 full TLS records per socket read

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.max_size = 64 * 1024  # type: ignore[misc]
        self._ssl_buffer_view = _shared_read_buffer(self.READ_SIZE)
        self._ssl_buffer = None

    def get_buffer(self, n):
        return self._ssl_buffer_view    # shared: buffer_updated consumes it before the next read

    # -- writes of one loop turn leave together -----------------------------------------------
    # uvicorn writes a response as two writes (head, body), the router a frame per message:
    # asyncio encrypts and sends each at once, one TLS record and one send() system call each.
    # Held until the end of the loop turn, they leave as one send, and as one record when they
    # are small (up to JOIN_BELOW: joining relayed 32 KiB frames would only copy them again);
    # shutdown sends what is held first; abort drops it, as it drops any unsent data.
    _zl_flush: asyncio.Handle | None = None
    _write_backlog: collections.deque
    _write_buffer_size: int
    _control_app_writing: Callable[[], None]

    def _write_appdata(self, list_of_data) -> None:
        if self._state != sslproto.SSLProtocolState.WRAPPED:
            return super()._write_appdata(list_of_data)
        for data in list_of_data:
            self._write_backlog.append(data)
            self._write_buffer_size += len(data)
        if self._zl_flush is None:
            self._zl_flush = self._loop.call_soon(self._zl_flush_now)
        self._control_app_writing()

    def _zl_flush_now(self) -> None:
        self._zl_flush = None
        backlog = self._write_backlog
        if self._state != sslproto.SSLProtocolState.WRAPPED or not backlog:
            return
        if 1 < len(backlog) and self._write_buffer_size <= JOIN_BELOW:
            joined = b"".join(backlog)   # small writes: one record (large ones: no copy, one send still)
            backlog.clear()
            backlog.append(joined)
        try:
            self._do_write()
        except Exception as ex:  # noqa: BLE001 - as asyncio's own write path reports it
            self._fatal_error(ex, "Fatal error on SSL protocol")

    # -- reads of a wrapped connection (the router's channels, uvicorn's HTTP protocols) ---------
    # asyncio reads records until OpenSSL raises SSLWantReadError (an exception built and caught
    # per socket read) and then looks for outgoing bytes; here the records are read while the
    # incoming BIO or OpenSSL hold any (as uvloop's own TLS does), and the outgoing BIO is only
    # looked at when it holds something (reading never changes what waits to be written).
    _app_protocol_is_buffer: bool
    _app_reading_paused: bool
    _app_protocol_get_buffer: Callable[[int], Any]
    _app_protocol_buffer_updated: Callable[[int], None]
    _app_protocol: asyncio.Protocol   # a copying one where _read_copied runs
    _outgoing: ssl.MemoryBIO
    _call_eof_received: Callable[[], None]
    _control_ssl_reading: Callable[[], None]
    _fatal_error: Callable[..., None]

    def _do_read(self) -> None:
        if self._state != sslproto.SSLProtocolState.WRAPPED or self._app_reading_paused:
            return super()._do_read()  # type: ignore[misc]
        try:
            eof = self._read_buffered() if self._app_protocol_is_buffer else self._read_copied()
            if eof:
                self._call_eof_received()
                self._start_shutdown()
                return
            if self._write_backlog:
                self._do_write()
            elif self._outgoing.pending:
                self._process_outgoing()
            self._control_ssl_reading()
        except Exception as ex:  # noqa: BLE001 - as asyncio's own read path reports it
            self._fatal_error(ex, "Fatal error on SSL protocol")

    def _read_buffered(self) -> bool:
        """The records waiting, into the app's buffer; True at the peer's close_notify."""
        incoming, sslobj = self._incoming, self._sslobj
        buf = self._app_protocol_get_buffer(incoming.pending)
        wants, offset, eof = len(buf), 0, False
        try:
            while incoming.pending or sslobj.pending():
                n: int = sslobj.read(wants - offset, buf[offset:] if offset else buf)  # type: ignore[assignment]
                if not n:            # close_notify
                    eof = True
                    break
                offset += n
                if offset == wants:  # the app's buffer is full: the rest on the next turn
                    self._loop.call_soon(self._do_read)
                    break
        except sslproto.SSLAgainErrors:
            pass
        del buf
        if offset:
            self._app_protocol_buffer_updated(offset)
        return eof

    def _read_copied(self) -> bool:
        """The records waiting, as one ``data_received`` (uvicorn's HTTP protocols: one request
        is usually one record, read without the exception asyncio waits for); True at the
        peer's close_notify."""
        incoming, sslobj, size = self._incoming, self._sslobj, self.max_size
        chunks: list[bytes] = []
        eof = False
        try:
            while incoming.pending or sslobj.pending():
                chunk = sslobj.read(size)
                if not chunk:        # close_notify
                    eof = True
                    break
                chunks.append(chunk)
        except sslproto.SSLAgainErrors:
            pass
        if chunks:
            self._app_protocol.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        return eof

    def _start_shutdown(self) -> None:
        if self._zl_flush is not None:
            self._zl_flush.cancel()
            self._zl_flush_now()
        super()._start_shutdown()


    _zl_busy = False
    _zl_pending: bytearray | None = None    # a bytearray while _zl_busy
    _zl_eof = False
    _zl_lost: tuple | None = None

    # asyncio's private state and steps (CPython >= 3.11) this class works with; typeshed does
    # not declare them (declared only, not set here)
    _sslobj: ssl.SSLObject
    _state: sslproto.SSLProtocolState
    _incoming: ssl.MemoryBIO
    _ssl_buffer_view: memoryview
    _process_outgoing: Callable[[], None]
    _do_flush: Callable[[], None]
    _do_shutdown: Callable[[], None]
    _do_write: Callable[[], None]
    _loop: asyncio.AbstractEventLoop

    def _do_handshake(self):
        if self._zl_busy:
            return
        self._zl_busy = True
        self._zl_pending = bytearray()
        sslobj = self._sslobj
        future = self._loop.run_in_executor(_handshake_pool(), _handshake_step, sslobj)
        future.add_done_callback(self._zl_step_done)

    def _zl_step_done(self, future) -> None:
        self._zl_busy = False
        pending, self._zl_pending = self._zl_pending, None
        if self._zl_lost is not None:
            super().connection_lost(*self._zl_lost)
            return
        if self._state != sslproto.SSLProtocolState.DO_HANDSHAKE or self._transport is None:
            return
        try:
            outcome = future.result()
        except BaseException as exc:  # noqa: BLE001 - reported like any handshake failure
            outcome = exc
        if outcome is _AGAIN:
            self._process_outgoing()
        elif isinstance(outcome, BaseException):
            self._on_handshake_complete(outcome)
        else:
            self._on_handshake_complete(None)
        if pending and self._transport is not None:
            self._incoming.write(pending)
            self._zl_dispatch()
        if self._zl_eof and not self._zl_busy and self._transport is not None:
            self._zl_eof = False
            if not super().eof_received() and self._transport is not None:
                self._transport.close()

    def _zl_dispatch(self) -> None:
        state = self._state
        if state == sslproto.SSLProtocolState.DO_HANDSHAKE:
            self._do_handshake()
        elif state == sslproto.SSLProtocolState.WRAPPED:
            self._do_read()
        elif state == sslproto.SSLProtocolState.FLUSHING:
            self._do_flush()
        elif state == sslproto.SSLProtocolState.SHUTDOWN:
            self._do_shutdown()

    def buffer_updated(self, nbytes):
        if self._zl_busy:
            assert self._zl_pending is not None
            self._zl_pending.extend(self._ssl_buffer_view[:nbytes])
            return
        super().buffer_updated(nbytes)

    def eof_received(self):
        if self._zl_busy:
            self._zl_eof = True
            return True  # the transport stays open until the step is done
        return super().eof_received()

    def connection_lost(self, exc):
        if self._zl_busy:
            self._zl_lost = (exc,)
            return
        super().connection_lost(exc)


JOIN_BELOW = 16 * 1024   # writes held in one loop turn are joined into one TLS record up to this size
_AGAIN = object()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _handshake_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(max(2, min(4, os.cpu_count() or 1)),
                                                      thread_name_prefix="ziti-lite-tls")
    return _pool


def _handshake_step(sslobj):
    try:
        sslobj.do_handshake()
    except (ssl.SSLWantReadError, ssl.SSLSyscallError):
        return _AGAIN
    except ssl.SSLError as exc:
        return exc
    return None


_buffers = threading.local()


def _shared_read_buffer(size: int) -> memoryview:
    """The TLS read buffer of this thread's loop (one per thread: each loop runs in one)."""
    view = getattr(_buffers, "view", None)
    if view is None or len(view) < size:
        view = _buffers.view = memoryview(bytearray(size))
    return view


async def create_tls_server(protocol_factory: Callable[[], asyncio.BaseProtocol], context: ssl.SSLContext,
                            *args: Any, handshake_timeout: float, shutdown_timeout: float = SSL_SHUTDOWN_TIMEOUT,
                            create_server: Callable[..., Any] | None = None, **kw: Any) -> asyncio.Server:
    """A TLS server on the running loop, whatever its implementation: ``loop.create_server``
    (or ``create_server``, the same method unpatched) without ``ssl``, each connection served by
    :class:`_OffloopHandshake` around ``protocol_factory()`` (which sees the decrypted stream
    and the client chain in ``get_extra_info("ssl_object")``). ``args``/``kw``: the rest of
    ``create_server``'s arguments (host, port, sock, backlog, ...). Every TLS listener of the
    process uses this, so its connections behave the same on asyncio's loop and on uvloop."""
    loop = asyncio.get_running_loop()

    def make() -> asyncio.BaseProtocol:
        return _OffloopHandshake(loop, protocol_factory(), context, None, server_side=True,
                                 ssl_handshake_timeout=handshake_timeout, ssl_shutdown_timeout=shutdown_timeout)

    return await (create_server or loop.create_server)(make, *args, **kw)


async def listen(protocol_factory: Callable[[], asyncio.BaseProtocol], context: ssl.SSLContext, host: str,
                 port: int, sock: Any = None, backlog: int = 256) -> tuple[asyncio.Server, int]:
    """Open a listener of long-lived TLS channels (the embedded router's, the control
    channel's) on ``sock`` when given, else on ``host``:``port`` (0: any free port); the server
    and the port it listens on."""
    kw: dict[str, Any] = {"sock": sock} if sock is not None else {"host": host, "port": port}
    server = await create_tls_server(protocol_factory, context, handshake_timeout=10.0, backlog=backlog, **kw)
    return server, port or server.sockets[0].getsockname()[1]


async def shut(task: asyncio.Task | None, server: asyncio.AbstractServer | None, channels: Iterable[Any],
               reason: str, cleanup: Callable[[], object] | None = None) -> None:
    """Stop a listener of long-lived channels (the embedded router's, the control channel's):
    its periodic ``task``, new connections, then every channel (``close(reason)``), aborted after
    a moment for their TLS goodbyes so that no transport outlives the loop; ``cleanup`` before
    waiting for the server (a hung peer never holds the shutdown more than 2 s)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if server is not None:
        server.close()
    closing = list(channels)
    for ch in closing:
        ch.close(reason)
    if closing:
        await asyncio.sleep(0.1)
        for ch in closing:
            if ch.transport is not None:
                ch.transport.abort()
    if cleanup is not None:
        cleanup()
    if server is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
