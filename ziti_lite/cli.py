"""The ``ziti-lite`` command: serve, snapshot, check, export, import, routes, version.

Each command imports what it runs when it runs (``ziti-lite version`` loads no server), and every
command that opens a database first loads the whole controller (``wiring.load``) so that its
registrations (integrity checks, listeners, ...) are all there whichever command runs.
"""

from __future__ import annotations

import os
import signal
import sys

import click

from . import __version__
from .config import Settings


@click.group()
def cli() -> None:
    """A lightweight OpenZiti controller in one SQLite file."""


@cli.command()
@click.option("--db", "db", required=True, type=click.Path(dir_okay=False), envvar="ZITI_LITE_DB",
              help="SQLite file (created when new)")
@click.option("--host", default="127.0.0.1", show_default=True, envvar="ZITI_LITE_HOST", help="address to listen on")
@click.option("--port", default=1280, show_default=True, type=int, envvar="ZITI_LITE_PORT")
@click.option("--advertise", default=None, envvar="ZITI_LITE_ADVERTISE",
              help="host name clients use (JWT issuer, certificate SAN)")
@click.option("--admin-user", default="admin", show_default=True, envvar="ZITI_LITE_ADMIN_USER",
              help="default admin username (new file only)")
@click.option("--admin-password", default=None, envvar="ZITI_LITE_ADMIN_PASSWORD",
              help="default admin password (new file only); generated and printed once when absent")
@click.option(
    "--edge-port",
    default=3022,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="ZITI_LITE_EDGE_PORT",
    help="TLS port of the embedded edge router (0: no router)",
)
@click.option(
    "--router-name",
    default="ziti-lite",
    show_default=True,
    envvar="ZITI_LITE_ROUTER_NAME",
    help="name of the embedded edge router",
)
@click.option(
    "--zac",
    default=None,
    envvar="ZITI_LITE_ZAC",
    type=click.Path(exists=True, file_okay=False),
    help="serve this built admin console (ZAC) at /zac/",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    envvar="ZITI_LITE_LOG_LEVEL",
    type=click.Choice(["critical", "error", "warning", "info", "debug", "trace"], case_sensitive=False),
)
@click.option(
    "--log-format",
    default="text",
    show_default=True,
    envvar="ZITI_LITE_LOG_FORMAT",
    type=click.Choice(["text", "json"]),
    help="json: one JSON object a line, access records with request ids",
)
@click.option(
    "--idle-timeout",
    default=5.0,
    show_default=True,
    type=float,
    envvar="ZITI_LITE_IDLE_TIMEOUT",
    help="seconds a connection may take to send a request (after connecting or its last response)",
)
@click.option(
    "--handshake-timeout",
    default=5.0,
    show_default=True,
    type=float,
    envvar="ZITI_LITE_HANDSHAKE_TIMEOUT",
    help="seconds for a TLS handshake",
)
@click.option(
    "--max-connections",
    default=None,
    type=int,
    envvar="ZITI_LITE_MAX_CONNECTIONS",
    help="open connections at most [default: 3/4 of the file descriptor limit]",
)
@click.option(
    "--loop",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "uvloop", "asyncio"]),
    envvar="ZITI_LITE_LOOP",
    help="event loop (auto: uvloop when installed)",
)
def serve(
    db,
    host,
    port,
    advertise,
    admin_user,
    admin_password,
    edge_port,
    router_name,
    zac,
    log_level,
    log_format,
    idle_timeout,
    handshake_timeout,
    max_connections,
    loop,
) -> None:
    """Create (if new) and serve a controller over HTTPS.

    Every option can also come from its environment variable: ZITI_LITE_ and the option's
    name in capitals with underscores (ZITI_LITE_DB, ZITI_LITE_PORT, ZITI_LITE_LOG_FORMAT, ...).
    """
    from .server import serve as run

    if zac and not os.path.isfile(os.path.join(zac, "index.html")):
        raise click.BadParameter(f"{zac} has no index.html (a built console has one)", param_hint="--zac")
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal to the handler
    # that was installed before it: make that an orderly exit with status 0, not a kill
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stopped)
    run(
        Settings(
            db=db,
            host=host,
            port=port,
            advertise=advertise,
            admin_user=admin_user,
            admin_password=admin_password,
            edge_port=edge_port,
            router_name=router_name,
            zac=zac,
            log_format=log_format,
            idle_timeout=idle_timeout,
            handshake_timeout=handshake_timeout,
            max_connections=max_connections,
            loop=loop,
        ),
        log_level=log_level.lower(),
    )


def _stopped(signum, frame) -> None:
    raise SystemExit(0)


@cli.command()
@click.option("--db", "db", required=True, type=click.Path(exists=True, dir_okay=False))
@click.argument("out", type=click.Path(dir_okay=False))
def snapshot(db, out) -> None:
    """Write a consistent copy of a (possibly live) controller database to OUT."""
    store = _open(db)
    store.snapshot(out)
    store.close()
    click.echo(f"snapshot written to {out}")


@cli.command()
@click.option("--db", "db", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--fix", is_flag=True, help="repair what can be repaired")
def check(db, fix) -> None:
    """Run the data integrity check (the Database API's check) in-process."""
    from . import integrity

    store = _open(db)
    problems = integrity.run(store, fix=fix)
    for p in problems:
        state = "fixed" if p.fixed else ("fixable" if p.fixable else "not fixable")
        click.echo(f"{state}: {p.description}")
    click.echo(f"{len(problems)} problem(s) found" + (f", {sum(p.fixed for p in problems)} fixed" if fix else ""))
    store.close()
    sys.exit(1 if any(not p.fixed for p in problems) else 0)


@cli.command("export")
@click.option("--db", "db", required=True, type=click.Path(exists=True, dir_okay=False), envvar="ZITI_LITE_DB")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def export_(db, file) -> None:
    """Write the network to FILE ('-': standard output) in the JSON format of 'ziti ops export'."""
    from . import exchange

    api = exchange.LocalApi(db)
    try:
        doc = exchange.export(api)
    except exchange.ExchangeError as e:
        raise click.ClickException(str(e)) from None
    finally:
        api.close()
    with click.open_file(file, "w") as f:
        f.write(exchange.dumps(doc))
    counts = ", ".join(f"{len(v)} {k}" for k, v in doc.items() if v)
    click.echo(f"exported {counts or 'nothing'}", err=True)
    click.echo(f"ziti-lite: {exchange.CANNOT_MOVE}", err=True)


@cli.command("import")
@click.option("--db", "db", required=True, type=click.Path(dir_okay=False), envvar="ZITI_LITE_DB")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def import_(db, file) -> None:
    """Create the entities of FILE (a 'ziti ops export' JSON document) that the network lacks."""
    from . import exchange

    with click.open_file(file) as f:
        text = f.read()
    try:
        doc = exchange.load(text)
    except exchange.ExchangeError as e:
        raise click.ClickException(str(e)) from None
    api = exchange.LocalApi(db)
    try:
        counts = exchange.import_(api, doc, say=lambda line: click.echo(line, err=True))
    except exchange.ExchangeError as e:
        raise click.ClickException(f"{e} (entities created before this one stay)") from None
    finally:
        api.close()
    for kind, c in counts.items():
        if c["created"] or c["skipped"]:
            click.echo(f"{kind}: {c['created']} created, {c['skipped']} already there", err=True)
    click.echo(f"ziti-lite: {exchange.CANNOT_MOVE}", err=True)


@cli.command()
@click.option("--api", type=click.Choice(["management", "client"]), default=None, help="only this API's routes")
def routes(api) -> None:
    """Print every operation: method, path, API, auth level and the handler (module:function)."""
    from . import wiring

    rows = [r for r in wiring.describe() if api is None or r[2] == api]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4])


def _open(db: str):
    """The database of a command, with every registration loaded (``wiring.load``)."""
    from . import wiring
    from .db.store import Store

    wiring.load()
    return Store(db)


@cli.command()
def version() -> None:
    """Print the ziti-lite version."""
    click.echo(f"ziti-lite {__version__}")
