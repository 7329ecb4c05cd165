"""The ``ziti-lite`` command: serve, snapshot, restore, check, export, import, apply, test, why, routes, version.

Each command imports what it runs when it runs (``ziti-lite version`` loads no server), and every
command that opens a database first loads the whole controller (``wiring.load``) so that its
registrations (integrity checks, listeners, ...) are all there whichever command runs.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from . import __version__, clock
from .config import Settings
from .events.bus import parse_types


@click.group()
def cli() -> None:
    """A lightweight OpenZiti controller in one SQLite file."""


REQUIRED = object()


class Duration(click.ParamType):
    """A duration as ``90s``, ``15m``, ``1h30m``, ``1d`` (or seconds), converted to seconds."""

    name = "duration"

    def convert(self, value: Any, param: Any, command: Any) -> float:   # (click's context, positionally)
        if isinstance(value, int | float):
            return float(value)
        try:
            return clock.parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, command)

# serve's options, each declared here once: (name, default, click type, help). The option is
# --NAME with dashes, its environment variable ZITI_LITE_NAME, and it goes to the Settings field
# of its name (config.py, whose defaults are the in-process ones: no router ports there); a bool
# default makes an --X/--no-X flag, a tuple one an option that may be given more than once (its
# environment variable: values separated by spaces). log_level is serve's own (uvicorn's and the loggers').
SERVE_OPTIONS: tuple[tuple[str, Any, Any, str | None], ...] = (
    ("db", REQUIRED, click.Path(dir_okay=False), "SQLite file (created when new)"),
    ("host", "127.0.0.1", None, "address to listen on"),
    ("port", 1280, int, None),
    ("advertise", None, None, "host name clients use (JWT issuer, certificate SAN)"),
    ("admin_user", "admin", None, "default admin username (new file only)"),
    ("admin_password", None, None, "default admin password (new file only); generated and printed once when absent"),
    ("edge_port", 3022, click.IntRange(0, 65535), "TLS port of the embedded edge router (0: no router)"),
    ("router_name", "ziti-lite", None, "name of the embedded edge router"),
    ("ctrl_port", 6262, click.IntRange(0, 65535),
     "TLS port of the control channel real OpenZiti routers connect to (0: none)"),
    ("ctrl_heartbeat_timeout", 30.0, click.FloatRange(1.0, 3600.0),
     "seconds a router may leave the controller's heartbeats unanswered before it is offline"),
    ("oidc", True, None,
     "serve the OIDC provider under /oidc (the oauth2 scheme: newer SDKs log in through it and"
     " /version advertises OIDC_AUTH); --no-oidc leaves clients on legacy API sessions"),
    ("oidc_redirect_uri", (), None,
     "a redirect URI the OIDC provider allows beyond the loopback /auth/callback ones, or a pattern"
     " (Go's path.Match: * and ? stop at /), e.g. https://console.example.com/auth/callback for a"
     " console served from there; repeatable (the environment variable: separated by spaces)"),
    ("oidc_post_logout_uri", (), None,
     "a post-logout redirect URI (or pattern) the OIDC provider allows beyond the loopback"
     " /auth/logout ones; repeatable"),
    ("zac", None, click.Path(exists=True, file_okay=False), "serve this built admin console (ZAC) at /zac/"),
    ("log_level", "info", click.Choice(["critical", "error", "warning", "info", "debug", "trace"],
                                       case_sensitive=False), None),
    ("log_format", "text", click.Choice(["text", "json"]),
     "json: one JSON object a line, access records with request ids"),
    ("idle_timeout", 5.0, float,
     "seconds a connection may take to send a request (after connecting or its last response)"),
    ("handshake_timeout", 5.0, float, "seconds for a TLS handshake"),
    ("max_connections", None, int, "open connections at most [default: 3/4 of the file descriptor limit]"),
    ("server_cert_days", 365, click.IntRange(1, 3650),
     "validity of the TLS server certificate, renewed while serving when a third of it is left (at least 30 days)"),
    ("events", None, click.Path(dir_okay=False, allow_dash=True),
     "write events (upstream's JSON shapes) to this file, one a line ('-': standard output)"),
    ("events_types", None, None,
     "comma-separated event types for --events (entityChange,edge.apiSessions,...) [default: all]"),
    ("events_max_mb", 10.0, click.FloatRange(min=0.001), "rotate the events file past this size"),
    ("events_keep", 5, click.IntRange(min=0), "rotated events files kept"),
    ("events_counts_interval", 300.0, click.FloatRange(min=1), "seconds between edge.entityCounts events"),
    ("audit_days", 90.0, click.FloatRange(min=0), "keep audit rows this long (0: no audit trail)"),
    ("audit_max_rows", 1_000_000, click.IntRange(min=1), "keep at most this many audit rows"),
    ("loop", "auto", click.Choice(["auto", "uvloop", "asyncio"]), "event loop (auto: uvloop when installed)"),
    ("snapshot_every", None, Duration(),
     "take a consistent snapshot of the database this often (90s, 15m, 1h, 1d) [default: never]"),
    ("snapshot_dir", None, click.Path(file_okay=False),
     "folder of the timed snapshots (must exist) [default: snapshots/ beside --db, created]"),
    ("snapshot_keep", 24, click.IntRange(min=1), "timed snapshots kept; the oldest beyond are removed"),
)


def _serve_options(command: Callable) -> Callable:
    for name, default, kind, help in reversed(SERVE_OPTIONS):
        flag = "--" + name.replace("_", "-")
        declared = f"{flag}/--no-{flag[2:]}" if isinstance(default, bool) else flag
        required = default is REQUIRED
        command = click.option(declared, name, required=required, default=None if required else default,
                               show_default=not required and default != (), type=kind,
                               multiple=isinstance(default, tuple), envvar=f"ZITI_LITE_{name.upper()}",
                               help=help)(command)
    return command


@cli.command()
@_serve_options
def serve(log_level: str, events_types: str | None, zac: str | None, **options: Any) -> None:
    """Create (if new) and serve a controller over HTTPS.

    Every option can also come from its environment variable: ZITI_LITE_ and the option's
    name in capitals with underscores (ZITI_LITE_DB, ZITI_LITE_PORT, ZITI_LITE_LOG_FORMAT, ...).
    """
    from .oidc.common import uri_pattern
    from .server import serve as run

    try:
        types = parse_types(events_types)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--events-types") from None
    if options.get("snapshot_dir") and not options.get("snapshot_every"):
        raise click.BadParameter("a snapshot folder without --snapshot-every: say how often too (e.g. 1h)",
                                 param_hint="--snapshot-dir")
    for name in ("oidc_redirect_uri", "oidc_post_logout_uri"):
        options[name] = list(options[name])
        for uri in options[name]:
            try:
                uri_pattern(uri)
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint="--" + name.replace("_", "-")) from None
    if zac and not os.path.isfile(os.path.join(zac, "index.html")):
        raise click.BadParameter(f"{zac} has no index.html (a built console has one)", param_hint="--zac")
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal to the handler
    # that was installed before it: make that an orderly exit with status 0, not a kill
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stopped)
    settings = Settings(**options, zac=zac, events_types=sorted(types) if types is not None else None)
    run(settings, log_level=log_level.lower())


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
@click.option("--db", "db", required=True, type=click.Path(dir_okay=False), envvar="ZITI_LITE_DB",
              help="the controller database to replace (its server must be stopped)")
@click.argument("snapshot", type=click.Path(exists=True, dir_okay=False))
def restore(db, snapshot) -> None:
    """Put SNAPSHOT (ziti-lite snapshot, serve --snapshot-every, litestream restore) back as the
    database --db; the file it replaces is kept aside as DB.replaced-<time>."""
    from .backup import restore as restoring

    try:
        done = restoring.restore(db, snapshot)
    except restoring.RestoreRefused as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"restored {db} from {snapshot}: {done.identities} identities, {done.routers} routers"
               f" (schema version {done.version})")
    if done.aside:
        click.echo(f"the file it replaced is kept as {done.aside}")
    if done.upgrade:
        click.echo(f"the snapshot is from an older ziti-lite: the server upgrades it to schema version"
                   f" {restoring.SCHEMA_VERSION} at its next start (a snapshot of it is written beside it first)")
    click.echo(f"start the controller: ziti-lite serve --db {db}"
               " (with the --advertise name and the ports its routers know)")


@cli.command()
@click.option("--db", "db", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--fix", is_flag=True, help="repair what can be repaired")
@click.option("--cert-days", default=30, show_default=True, type=click.IntRange(0, 3650),
              help="report certificates that end within this many days")
def check(db, fix, cert_days) -> None:
    """Run the data integrity check (the Database API's check) in-process, and report the
    certificates (the controller's, identities', routers') that end within --cert-days."""
    import datetime as dt

    from . import integrity
    from .lifecycle import expiry

    store = _open(db)
    problems = integrity.run(store, fix=fix)
    for p in problems:
        state = "fixed" if p.fixed else ("fixable" if p.fixable else "not fixable")
        click.echo(f"{state}: {p.description}")
    click.echo(f"{len(problems)} problem(s) found" + (f", {sum(p.fixed for p in problems)} fixed" if fix else ""))
    ending = expiry.report(store, dt.timedelta(days=cert_days))
    for line in ending:
        click.echo(line)
    click.echo(f"{len(ending)} certificate(s) end within {cert_days} days")
    store.close()
    sys.exit(1 if any(not p.fixed for p in problems) else 0)


@cli.command("export")
@click.option("--db", "db", required=True, type=click.Path(exists=True, dir_okay=False), envvar="ZITI_LITE_DB")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def export_(db, file) -> None:
    """Write the network to FILE ('-': standard output) in the JSON format of 'ziti ops export'."""
    from . import exchange

    api = _local_api(db)
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
    api = _local_api(db)
    try:
        counts = exchange.import_(api, doc, say=lambda line: click.echo(line, err=True))
    except exchange.ExchangeError as e:
        raise click.ClickException(f"{e} (entities created before this one stay)") from None
    finally:
        api.close()
    for kind, c in counts.items():
        if c["created"] or c["skipped"] or c["updated"]:
            updated = f", {c['updated']} updated" if c["updated"] else ""
            click.echo(f"{kind}: {c['created']} created{updated}, {c['skipped']} already there", err=True)
    click.echo(f"ziti-lite: {exchange.CANNOT_MOVE}", err=True)


@cli.command()
@click.option("--db", "db", required=True, type=click.Path(exists=True, dir_okay=False), envvar="ZITI_LITE_DB")
@click.option("--since", default=None, help="only rows of the last 30m, 1h, 7d, ... or since an RFC 3339 time")
@click.option("--identity", default=None, help="only rows of this caller (identity name or id)")
@click.option("--entity", default=None, help="only rows of this entity type (services, identities, ...)")
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(min=1), help="the newest rows at most")
@click.option("--json", "as_json", is_flag=True, help="one JSON object a line (the fields of GET /ziti-lite/v1/audit)")
def audit(db, since, identity, entity, limit, as_json) -> None:
    """Print the audit trail: who changed what, and logins, oldest first."""
    import datetime as dt
    import json
    import re

    stamp = None
    if since:
        m = re.fullmatch(r"(\d+)([smhd])", since.strip())
        if m:
            seconds = int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
            stamp = clock.fmt(clock.now() - dt.timedelta(seconds=seconds))
        else:
            try:
                stamp = clock.fmt(clock.parse(since))
            except ValueError:
                raise click.BadParameter(f"{since!r} is neither a duration (30m, 1h, 7d) nor an RFC 3339 time",
                                         param_hint="--since") from None
    store = _open(db)
    try:
        from .events.audit import query, render

        rows = query(store, since=stamp, identity=identity, entity=entity, limit=limit)
    finally:
        store.close()
    for row in rows:
        if as_json:
            out = render(None, row)  # type: ignore[arg-type]
            out["changes"] = json.loads(row["changes"])
            click.echo(json.dumps(out))
        else:
            who = row["identity_name"] or row["identity_id"] or "-"
            what = f"{row['entity_type'] or '-'}/{row['entity_id'] or '-'}"
            name = f" ({row['entity_name']})" if row["entity_name"] else ""
            fields = ",".join(json.loads(row["changes"])) or "-"
            outcome = "" if row["outcome"] == "success" else f" FAILED {row['reason'] or ''}"
            click.echo(f"{row['created_at']}  {who}  {row['remote_address'] or '-'}  {row['operation']}  "
                       f"{what}{name}  {fields}{outcome}")


@cli.command()
@click.option("--api", type=click.Choice(["management", "client", "fabric"]), default=None,
              help="only this API's routes")
def routes(api) -> None:
    """Print every operation: method, path, API, auth level, the permission an admin-level one
    needs (OpenZiti 2.0's ``entity.action``; ``admin``: admins only) and the handler (module:function)."""
    from . import wiring

    rows = [r for r in wiring.describe() if api is None or r[2] == api]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=True)) + "  " + row[5])


@cli.command()
@click.option("--resource", "name", default=None, help="only this collection (e.g. identities)")
def hooks(name) -> None:
    """Print the write path: per resource, what runs on create, update, delete and list (hooks,
    listeners, list conditions, prefetchers; module:function), then the integrity checks."""
    from . import wiring

    chosen = [r for r in wiring.resources() if name is None or r.name == name]
    if not chosen:
        raise click.ClickException(f"no resource {name!r}: `ziti-lite hooks` lists them all")
    for res in chosen:
        click.echo(res.name)
        for operation, steps in wiring.hooks(res).items():
            click.echo(f"  {operation}")
            for step, fn in steps:
                click.echo(f"    {step:<27} {fn}")
    if name is None:
        click.echo("integrity checks (ziti-lite check, /database/check-data-integrity)")
        for fn in wiring.integrity_checks():
            click.echo(f"    {fn}")


def _local_api(db: str):
    """The in-process API of ``import``/``export`` on ``db``; a refused file is one line, exit 1."""
    from . import exchange
    from .db.store import DatabaseRefused

    try:
        return exchange.LocalApi(db)
    except DatabaseRefused as e:
        raise click.ClickException(str(e)) from None


def _open(db: str):
    """The database of a command, with every registration loaded (``wiring.load``)."""
    from . import wiring
    from .db.store import DatabaseRefused, Store

    wiring.load()
    try:
        return Store(db)
    except DatabaseRefused as e:
        raise click.ClickException(str(e)) from None


@cli.command()
def version() -> None:
    """Print the ziti-lite version."""
    click.echo(f"ziti-lite {__version__}")


# ---------------------------------------------------------------- network as code
def _target(fn):
    """The network a netcode command works on: a database file or a running controller."""
    options = (
        click.option("--db", "db", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="work on this database file (in-process, beside a running server too)"),
        click.option("--controller", default=None, envvar="ZITI_LITE_CONTROLLER",
                     help="work on a running controller: https://HOST:PORT (ziti-lite or OpenZiti)"),
        click.option("--username", default=None, envvar="ZITI_LITE_USERNAME", help="the controller's admin"),
        click.option("--password", default=None, envvar="ZITI_LITE_PASSWORD", help="the admin's password"),
        click.option("--ca", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="CA bundle of the controller [default: its /.well-known/est/cacerts]"),
    )
    for option in reversed(options):
        fn = option(fn)
    return fn


def _connect(db, controller, username, password, ca):
    from . import exchange
    from .netcode import remote
    from .netcode.document import NetcodeError

    if bool(db) == bool(controller):
        raise click.UsageError("give one of --db PATH or --controller URL")
    try:
        if db:
            return exchange.LocalApi(db)
        if not username or not password:
            raise click.UsageError("--controller needs --username and --password (or ZITI_LITE_USERNAME/PASSWORD)")
        return remote.RemoteApi(controller, username, password, ca)
    except (NetcodeError, exchange.ExchangeError) as e:
        raise click.ClickException(str(e)) from None


def _network(file: str):
    from .netcode import document

    try:
        with click.open_file(file) as f:
            text = f.read()
    except OSError as e:
        raise click.ClickException(f"{file}: {e.strerror}") from None
    try:
        return document.load(text, file)
    except document.NetcodeError as e:
        raise click.ClickException(str(e)) from None


@cli.command("apply")
@_target
@click.option("--dry-run", is_flag=True, help="print the plan and check the tests; change nothing (exit 2: changes)")
@click.option("--prune", is_flag=True, help="delete what the file's entity kinds do not list (never built-ins)")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def apply_(db, controller, username, password, ca, dry_run, prune, file) -> None:
    """Make the network what FILE (JSON or YAML, 'ziti ops export' shape + tests) describes.

    Prints the plan first; exit 0 done or nothing to do, 2 changes planned (--dry-run), 1 error
    or a failed test (then nothing is written)."""
    from . import exchange
    from .netcode import apply
    from .netcode.document import NetcodeError

    network = _network(file)
    api = _connect(db, controller, username, password, ca)
    try:
        run = apply.apply_local if isinstance(api, exchange.LocalApi) else apply.apply_remote
        outcome = run(api, network, prune, dry_run, click.echo)
    except (NetcodeError, exchange.ExchangeError) as e:
        raise click.ClickException(str(e)) from None
    finally:
        api.close()
    if network.tests:
        click.echo(f"tests: {len(network.tests) - len(outcome.failures)} of {len(network.tests)} pass")
    if outcome.failures:
        for failure in outcome.failures:
            click.echo(f"FAILED {failure}", err=True)
        raise click.ClickException(f"{file}: {len(outcome.failures)} test(s) fail on the planned network;"
                                   " nothing was changed")
    if dry_run:
        sys.exit(2 if outcome.changes else 0)
    if outcome.applied:
        click.echo(f"applied {len(outcome.changes)} change(s)")


@cli.command("test")
@_target
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def test_(db, controller, username, password, ca, file) -> None:
    """Check FILE's tests against the network as it is now (exit 1 when one fails)."""
    from . import exchange
    from .netcode import assertions
    from .netcode.document import NetcodeError, describe

    network = _network(file)
    api = _connect(db, controller, username, password, ca)
    try:
        problems = assertions.results(api, network.tests)
    except (NetcodeError, exchange.ExchangeError) as e:
        raise click.ClickException(str(e)) from None
    finally:
        api.close()
    for t, problem in zip(network.tests, problems, strict=True):
        click.echo(f"FAILED {describe(t)}: {problem}" if problem else f"ok     {describe(t)}")
    failed = sum(p is not None for p in problems)
    click.echo(f"tests: {len(network.tests) - failed} of {len(network.tests)} pass")
    if failed:
        sys.exit(1)


@cli.command("why")
@_target
@click.option("--dial", "policy_type", flag_value="Dial", default=True, help="explain dialing (default)")
@click.option("--bind", "policy_type", flag_value="Bind", help="explain binding")
@click.argument("identity")
@click.argument("service")
def why_(db, controller, username, password, ca, policy_type, identity, service) -> None:
    """Explain whether IDENTITY may dial (or bind) SERVICE, and every reason (names or ids)."""
    from . import exchange
    from .netcode import why
    from .netcode.document import NetcodeError

    api = _connect(db, controller, username, password, ca)
    try:
        _, lines = why.explain(api, identity, service, policy_type)
    except (NetcodeError, exchange.ExchangeError) as e:
        raise click.ClickException(str(e)) from None
    finally:
        api.close()
    for line in lines:
        click.echo(line)
