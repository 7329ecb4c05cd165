"""The controller: one Store, one route table, and the ASGI entry point.

Path handling follows upstream: ``/edge/management/v1/...`` is the management API;
``/fabric/v1/...`` the fabric management API (its read operations, ``ziti_lite/fabric``);
``/edge/client/v1/...``, the legacy ``/edge/v1/...`` and every path outside ``/edge``,
``/fabric`` and ``/.well-known`` are the client API (``/version`` and ``/`` included), and
``/.well-known/est/cacerts`` is served by both.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import socket
import ssl
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, assert_never

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

from . import UPSTREAM_VERSION, bootstrap, clock, ctrl, edge, permissions, wiring
from .api import envelope as env
from .api.context import Ctx, not_parsable, too_deep
from .api.ops import AFTER_CHANGE, WEBSOCKETS
from .api.router import AuthLevel, Router
from .auth import oidc_tokens, sessions
from .backup.schedule import Snapshotter
from .config import Settings
from .ctrl.server import CtrlServer
from .db.checkpoint import Checkpointer
from .db.store import Generation, Store
from .edge.router import EdgeRouter
from .errors import ApiError, NotFound, Unauthorized, generic_cause
from .events import runtime as events_runtime
from .events import tables as event_tables
from .events.bus import Bus
from .lifecycle import renewal
from .observe import PATHS, Observer
from .oidc.provider import Provider as OidcProvider
from .policy.posture_checks import PostureState
from .zac import Console

log = logging.getLogger("ziti_lite")

MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"
FABRIC = "/fabric/v1"
CORS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-credentials", b"true"),
    (b"access-control-allow-headers", b"content-type, accept, authorization, zt-session"),
    (b"access-control-allow-methods", b"GET, HEAD, POST, PUT, PATCH, DELETE"),
]


_CHANGES = frozenset(("POST", "PUT", "PATCH", "DELETE"))
_EXPIRY_HEADS: dict[tuple[str, int], tuple[str, bytes]] = {}


class Controller:
    """Everything a request handler may need, created once per process. Every attribute is
    declared here (``__slots__``): state a module keeps per controller has its slot below."""

    __slots__ = ("settings", "store", "activity", "state", "instance_id", "router", "jobs", "checkpointer", "snapshots",
                 "ssl_context", "edge_ssl_context", "edge_sock", "edge_router", "router_states", "periodic",
                 "router_lines", "ctrl_ssl_context", "ctrl_sock", "ctrl_server",
                 "session_rows", "extjwt_keys", "posture_states", "service_change_memory", "service_override_sigs",
                 "traces", "tls_contexts", "cert_renewals", "events", "oidc", "oidc_verified", "_headers")

    settings: Settings
    store: Store
    activity: dict[str, str]                # API session token -> last activity this process saw (auth.sessions)
    state: dict[str, str]                   # the controller table: instance id, PKI PEMs (bootstrap.ensure)
    instance_id: str
    router: Router                          # the route table (wiring.load)
    jobs: dict[str, Any]                    # the integrity job and the snapshot rate limit (handlers/database.py)
    checkpointer: Checkpointer | None       # made by the first lifespan (serving)
    snapshots: Snapshotter | None           # timed snapshots while serving (backup/schedule.py; --snapshot-every)
    ssl_context: ssl.SSLContext | None      # the API's TLS context (server.build sets it)
    edge_ssl_context: ssl.SSLContext | None  # the edge router's (server.build sets it)
    edge_sock: socket.socket | None         # a pre-bound socket for the edge router (tests)
    edge_router: EdgeRouter | None          # while the embedded router runs (edge.start/stop)
    router_states: dict[str, dict]          # router id -> live state shown by the API
    router_lines: dict[str, str]            # real router id -> the version its last hello named
    ctrl_ssl_context: ssl.SSLContext | None  # real routers' control channel (server.build sets it)
    ctrl_sock: socket.socket | None         # a pre-bound socket for the control channel (tests)
    ctrl_server: CtrlServer | None          # while the control channel listens (ctrl.start/stop)
    periodic: list[Callable[[Controller], object]]  # run by the janitor every few seconds (client.sessions)
    session_rows: tuple[Generation, dict[str, Any]] | None  # the session lookup cache (auth.sessions)
    extjwt_keys: dict[str, Any]             # JWKS keys of ext-jwt signers (auth.extjwt)
    oidc: OidcProvider | None               # the OIDC provider under /oidc (None: --no-oidc)
    oidc_verified: dict[str, dict]          # verified OIDC access tokens -> claims (auth.oidc_tokens)
    posture_states: dict[str, PostureState]  # identity id -> posture responses (policy.posture_checks)
    service_change_memory: dict[str, str]   # identity id -> in-memory lastChangeAt (client.changes)
    service_override_sigs: dict[str, str]   # identity id -> its service-config overrides' digest (client.changes)
    traces: dict[str, dict]                 # identity id -> tracing spec (PUT /identities/{id}/trace)
    tls_contexts: list[ssl.SSLContext]      # every live TLS server context: renewals reload them (lifecycle.contexts)
    cert_renewals: dict[str, int]           # certificate -> renewals by this process, for /metrics (lifecycle.renewal)
    events: Bus                             # the event stream: sinks and SSE streams subscribe (events/)

    def __init__(self, settings: Settings, store: Store | None = None):
        self.settings = settings
        self.store = store or Store(settings.db)
        self.activity = {}
        self.tls_contexts = []
        self.cert_renewals = {}
        self.state = bootstrap.ensure(self)      # instance id, PKI, default rows
        self.instance_id = self.state["instance_id"]
        self.jobs = {}
        self.checkpointer = None
        self.snapshots = None
        self.ssl_context = None
        self.edge_ssl_context = None
        self.edge_sock = None
        self.edge_router = None
        self.router_states = {}
        self.router_lines = {}
        self.ctrl_ssl_context = None
        self.ctrl_sock = None
        self.ctrl_server = None
        self.periodic = []
        self.session_rows = None
        self.extjwt_keys = {}
        self.posture_states = {}
        self.service_change_memory = {}
        self.service_override_sigs = {}
        self.traces = {}
        self.events = Bus(self.instance_id)
        event_tables.watch(self.store, self.events)  # API session, session, terminator rows
        self.router = wiring.router()
        self.oidc_verified = {}
        self._headers = [(b"server", f"ziti-controller/v{UPSTREAM_VERSION}".encode()),
                         (b"ziti-instance-id", self.instance_id.encode())]
        # the OIDC provider answers with the same server, instance and CORS headers (browser consoles)
        self.oidc = OidcProvider(self, self._headers + CORS) if settings.oidc else None

    # ---------------------------------------------------------------- ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        api, path = split_path(scope["path"])
        method = scope["method"]
        ctx: Ctx | None = None
        response: env.JSON
        try:
            methods, params = self.router.match(api, path) if api else (None, {})
            if methods is None or api is None:
                raise NotFound(message=f"path {scope['path']} was not found")
            route = methods.get(method)
            if route is None and method == "HEAD":
                route = methods.get("GET")
            if route is None:
                if method == "OPTIONS":
                    response = env.JSON(b"", status_code=200)
                    return await self._send(response, scope, receive, send)
                allowed = ",".join(sorted(methods))
                raise ApiError("METHOD_NOT_ALLOWED",
                               cause=generic_cause(f"method {method} is not allowed, but [{allowed}] are"))
            scope["zl.route"] = route   # for metrics and access records (observe.py)
            ctx = Ctx(self, request, api, params, route)
            await self.authorize(ctx, route.auth, route.perm)
            response = await route.handler(ctx)
            if method in _CHANGES and AFTER_CHANGE and response.status_code < 300:
                for hook in AFTER_CHANGE:
                    hook(ctx, response)
        except ApiError as e:
            response = env.error_response(e)
        except UnicodeDecodeError as e:  # a body that is not UTF-8, decoded by a handler's own code
            response = env.error_response(not_parsable(e))
        except RecursionError:  # a JSON body nested deeper than any parser will follow
            log.warning("recursion limit on %s %s", method, scope["path"])
            response = env.error_response(too_deep())
        except Exception:  # a bug: answer with the envelope, keep serving
            log.error("unhandled error on %s %s\n%s", method, scope["path"], traceback.format_exc())
            response = env.error_response(ApiError())
        if ctx is not None and ctx.session is not None:
            response.raw_headers.extend(self._expiry_headers(ctx.session))
        await self._send(response, scope, receive, send)

    def _expiry_headers(self, session: sessions.Session) -> list[tuple[bytes, bytes]]:
        """``expiration-seconds`` and ``expires-at`` (Go's default time text) for a valid session."""
        timeout = self.settings.session_timeout
        stamp = session.last_activity_at
        if isinstance(timeout, int) and len(stamp) == 24 and stamp[19] == "." and stamp[23] == "Z":
            # a whole number of seconds later: only the date-time part changes, computed once a second
            key = (stamp[:19], timeout)
            head = _EXPIRY_HEADS.get(key)
            if head is None:
                if len(_EXPIRY_HEADS) > 64:
                    _EXPIRY_HEADS.clear()
                t = clock.parse(stamp[:19] + "Z") + dt.timedelta(seconds=timeout)
                head = _EXPIRY_HEADS[key] = (t.strftime("%Y-%m-%d %H:%M:%S"), str(timeout).encode())
            ms = stamp[20:23].rstrip("0")
            text = head[0] + ("." + ms if ms else "") + " +0000 UTC"
            return [(b"expiration-seconds", head[1]), (b"expires-at", text.encode())]
        t = clock.parse(stamp) + dt.timedelta(seconds=timeout)
        frac = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
        text = t.strftime("%Y-%m-%d %H:%M:%S") + frac + " +0000 UTC"
        return [(b"expiration-seconds", str(timeout).encode()), (b"expires-at", text.encode())]

    async def _send(self, response: env.JSON, scope: Scope, receive: Receive, send: Send) -> None:
        scope["zl.status"] = response.status_code   # for metrics and access records (observe.py)
        response.raw_headers.extend(self._headers)
        response.raw_headers.extend(CORS)
        await response(scope, receive, send)

    async def authorize(self, ctx: Ctx, level: AuthLevel, need: permissions.Need = None) -> None:
        """Let the request through at ``level`` or raise 401: ``public`` anyone, ``partial`` any
        valid API session (even one that still owes a secondary factor), ``session`` a complete
        one, ``admin`` a complete one whose identity is an admin or holds a permission that
        covers ``need`` (``permissions.allows``; None: admins only). The identity's admin flag
        and permissions come with the session's row, read again after any change of the
        database, so a demotion counts from the next request of every session it has open."""
        if level == "public":
            return
        headers = ctx.request.headers
        token = headers.get("zt-session")
        if not token and self.oidc is not None:
            # an OIDC access token as Authorization: Bearer (upstream: zt-session first); the
            # JWKS warm-up below (~0.1 ms) only where a secondary ext-jwt factor may be missing
            session = oidc_tokens.lookup(self, headers)
            if session is not None and session.partial:
                await sessions.warm(self, headers)
                session = oidc_tokens.lookup(self, headers)
        else:
            session = None
        if session is None:
            await sessions.warm(self, headers)  # JWKS keys for a secondary ext-jwt factor
            session = sessions.lookup(self, token, headers)
        if session is None:
            # upstream: a missing token is "unauthenticated for invalid credentials", an unknown one
            # a 401 without a cause; both say why in WWW-Authenticate
            if not (token or "").strip():
                raise Unauthorized(challenge="no zt-session header")
            raise Unauthorized(None, challenge="the zt-session is not valid (unknown, expired or logged out):"
                                               " authenticate again")
        ctx.session = session
        if level == "partial":
            return
        if session.partial:
            raise Unauthorized(None, challenge="the API session still owes a secondary factor (MFA or ext-jwt)")
        if level == "session":
            return
        if level == "admin":
            if not session.is_admin and not permissions.allows(False, session.permissions, need):
                ctx.request.scope["zl.refused"] = permissions.label(need)   # counted in /metrics (observe.py)
                granting = permissions.granting(need)
                raise Unauthorized(None, challenge="this operation needs an admin identity" + (
                    f" or one of the permissions {', '.join(granting)}" if granting else ""))
            return
        assert_never(level)


def split_path(path: str) -> tuple[str | None, str]:
    if path.startswith(MGMT):
        rest = path[len(MGMT):]
        if rest == "" or rest.startswith("/"):
            return "management", rest or "/"
    if path.startswith(CLIENT):
        rest = path[len(CLIENT):]
        if rest == "" or rest.startswith("/"):
            return "client", rest or "/"
    if path.startswith(FABRIC):
        rest = path[len(FABRIC):]
        if rest == "" or rest.startswith("/"):
            return "fabric", rest or "/"
    if path.startswith("/edge/v1/") or path == "/edge/v1":
        return "client", path[len("/edge/v1"):] or "/"
    if path.startswith("/edge") or path.startswith("/fabric"):
        return None, path
    return "client", path  # unprefixed client API, /.well-known included


def create_app(settings: Settings, store: Store | None = None) -> Starlette:
    ctl = Controller(settings, store)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        # WAL checkpoints run in a worker thread while serving, never inside a request's COMMIT;
        # at shutdown the whole log is copied into the database file
        checkpointer = None
        if settings.checkpointer:
            if ctl.checkpointer is None:
                ctl.checkpointer = Checkpointer(ctl.store)
            checkpointer = ctl.checkpointer
            checkpointer.start()
        snapshots = _start_snapshots(ctl)
        if renewal.tick not in ctl.periodic:   # certificates renewed while serving
            ctl.periodic.append(renewal.tick)
        if oidc_tokens.prune not in ctl.periodic:   # expired revocations (the provider's and /revocations')
            ctl.periodic.append(oidc_tokens.prune)
        task = asyncio.create_task(_janitor(ctl))
        events_runtime.start(ctl)   # the events file, entity counts, audit retention
        await edge.start(ctl)
        await ctrl.start(ctl)
        try:
            yield
        finally:
            await ctrl.stop(ctl)
            await edge.stop(ctl)
            await events_runtime.stop(ctl)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if snapshots is not None:
                snapshots.stop()
            if checkpointer is not None:
                checkpointer.stop()

    app = _App(routes=[Mount("", app=ctl)], lifespan=lifespan)
    app.controller = ctl
    if settings.zac:
        app.console = Console(settings.zac)
    observer = app.observer = Observer(ctl, access_log=settings.log_format == "json")
    app.specials = dict.fromkeys(PATHS, observer.special)
    app.state.controller = ctl
    return app


def _start_snapshots(ctl: Controller) -> Snapshotter | None:
    """The timed snapshots of ``--snapshot-every`` (the first lifespan starts them; a nested one
    shares them)."""
    settings = ctl.settings
    if not settings.snapshot_every or (ctl.snapshots is not None and ctl.snapshots.started):
        return None
    if settings.db in ("", ":memory:") or settings.db.startswith("file:"):
        log.warning("--snapshot-every: %s is no file; no snapshots are taken", settings.db)
        return None
    ctl.snapshots = Snapshotter(settings.db, settings.snapshot_every, settings.snapshot_dir, settings.snapshot_keep)
    ctl.snapshots.start()
    return ctl.snapshots


class _App(Starlette):
    """Starlette for the lifespan and ``app.state``; HTTP requests go straight to the controller,
    whose own trie router answers every path (errors included), so Starlette's router and
    middleware layers are skipped (~5 µs of every request)."""

    controller: Controller
    console: Console | None = None      # with --zac
    observer: Observer | None = None    # metrics, access records
    specials: dict[str, Callable[[Scope, Receive, Send], Awaitable[None]]] = {}  # /health-checks, /metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope["app"] = self
            path = scope["path"]
            special = self.specials.get(path)
            if special is not None:
                await special(scope, receive, send)
                return
            oidc = self.controller.oidc
            if oidc is not None and oidc.handles(path):
                await oidc(scope, receive, send)
                return
            if self.console is not None and self.console.handles(path):
                console, controller = self.console, self.controller

                async def serve_console(scope: Scope, receive: Receive, send: Send) -> None:
                    await console(scope, receive, send, controller)
                if self.observer is not None:   # the console's files get access records too
                    await self.observer(scope, receive, send, serve_console)
                else:
                    await serve_console(scope, receive, send)
                return
            if self.observer is not None:
                await self.observer(scope, receive, send, self.controller)
                return
            await self.controller(scope, receive, send)
            return
        if scope["type"] == "websocket":
            handler = WEBSOCKETS.get(scope["path"])
            if handler is None:
                await send({"type": "websocket.close", "code": 1008})
                return
            await handler(self.controller, scope, receive, send)
            return
        await super().__call__(scope, receive, send)


STATISTICS_EVERY = 12   # janitor runs (of 5 s) between two refreshes of the query planner's statistics


async def _janitor(ctl: Controller) -> None:
    """Expire idle API sessions every few seconds, as upstream's enforcer does, refresh the
    query planner's statistics every minute (tables that grew), and run the ``periodic`` hooks
    (MFA posture sweeps, certificate renewal)."""
    runs = 0
    while True:
        await asyncio.sleep(5)
        runs += 1
        try:
            sessions.expire(ctl)
            if runs % STATISTICS_EVERY == 0:
                ctl.store.refresh_statistics()
            for hook in ctl.periodic:
                hook(ctl)
        except Exception:
            log.exception("session janitor")
