"""Running the controller under uvicorn with real TLS on the API port.

The TLS contexts are built here from the PEMs stored in the database and registered on the
controller, whose certificate renewals reload them while serving (``lifecycle/contexts.py``):
TLS 1.2+, the RSA server certificate with its chain, and a client certificate requested but not required. Whatever chain
a client presents passes the handshake (``tls.accept_any_client_chain``); the handlers read it
through ``tls.py`` and verify it against the CAs valid at that moment. Only where that callback
cannot be installed does OpenSSL check chains in the handshake, against the controller's CA
bundle plus the CA entities registered through the API (``tls.trust`` adds new ones while
running), without validity dates (auth policy ``allowExpiredCerts``) and with a registered CA
counting as an anchor even when it is an intermediate.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import uvicorn

from . import connections, logs, tls
from .app import create_app
from .config import Settings
from .db import lock as dblock
from .db.store import DatabaseRefused
from .lifecycle import contexts, startup

if TYPE_CHECKING:
    pass

GRACEFUL_SHUTDOWN = 10   # seconds in-flight requests get to finish at shutdown
def build(settings: Settings, log_level: str = "info", app=None) -> uvicorn.Server:
    """A uvicorn server for ``settings`` (not started); its controller is ``server.controller``."""
    logging_config: dict[str, Any] = {}   # empty: uvicorn's own logging setup
    if settings.log_format == "json":   # our JSON handler on the root logger, not uvicorn's text ones
        logs.configure("json", log_level)
        logging_config["log_config"] = None
    app = app or create_app(settings)
    ctl = app.state.controller
    startup.check(ctl)   # before anything listens: one line and exit 1 (serve) for what cannot work
    # one TLS context per listener, built and registered where renewals reload them
    ctl.ssl_context = contexts.api(ctl)
    ctl.edge_ssl_context = contexts.edge(ctl)
    ctl.ctrl_ssl_context = contexts.ctrl(ctl)
    limits = connections.Limits(settings.idle_timeout, settings.handshake_timeout, settings.max_connections)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level, **logging_config,
                            loop=loop_name(settings.loop),
                            lifespan="on", server_header=False, date_header=True, access_log=False,
                            http=connections.protocol_class(tls.protocol_class(), limits),
                            # (typed int by uvicorn; it only passes it on to loop.call_later, which takes a float)
                            timeout_keep_alive=settings.idle_timeout,  # type: ignore[arg-type]
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
                            ssl_context_factory=lambda _config, _default: ctl.ssl_context)
    config.load()
    server = connections.GuardedServer(config)
    server.limits = limits
    server.before_shutdown = [ctl.events.end_streams]   # SSE and ws-api streams end at once
    server.controller = ctl  # type: ignore[attr-defined]
    return server


def loop_name(choice: str) -> str:
    """uvicorn's name of the event loop for ``--loop``: uvloop (about twice the requests per
    second of asyncio's loop, benchmarks/) when it is installed and not declined, else asyncio's."""
    if choice == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if choice == "uvloop":
            raise SystemExit("ziti-lite: --loop uvloop, but uvloop is not installed (pip install uvloop)") from None
        return "asyncio"
    return "uvloop"


def serve(settings: Settings, workers: int = 1, log_level: str = "info") -> None:
    try:
        held = dblock.acquire(settings.db)  # one serving process per database file
    except dblock.DatabaseInUse as e:
        sys.exit(f"ziti-lite: {e}")
    except OSError as e:   # the lock file beside the database cannot be made
        where = os.path.dirname(os.path.abspath(settings.db))
        why = f"no directory {where}" if not os.path.isdir(where) else (e.strerror or str(e)).lower()
        sys.exit(f"ziti-lite: cannot open {settings.db} ({why}): give --db a path in a directory ziti-lite may write")
    try:
        try:
            server = build(settings, log_level)
        except (DatabaseRefused, startup.StartupError) as e:
            sys.exit(f"ziti-lite: {e}")
        say = print if settings.log_format != "json" else logging.getLogger("ziti_lite").warning
        say(f"ziti-lite: serving the OpenZiti edge APIs on {settings.base_url} (db {settings.db})")
        if settings.edge_port:
            say(f"ziti-lite: embedded edge router '{settings.router_name}' on tls://{settings.public_host}:"
                f"{settings.edge_port}")
        if settings.ctrl_port:
            say(f"ziti-lite: router control channel on tls:{settings.public_host}:{settings.ctrl_port}")
        sys.stdout.flush()
        # what start-up made (imports, schema, PKI) lives as long as the process: keep it out of
        # the collector's full passes, which otherwise stalled the loop 60-125 ms (benchmarks/)
        gc.collect()
        gc.freeze()
        server.run()
    finally:
        dblock.release(held)
