"""The one seam between ziti-lite and its SQLite file.

The API keeps one apsw connection and uses it on its event-loop thread: apsw calls take
microseconds, and a threadpool hop would cost more than the query (see performance notes). The
embedded router's thread has a ``Store`` of its own (``edge/thread.py``): one connection is
never used by two threads at once.
Every write runs inside ``Store.write()``: one ``BEGIN IMMEDIATE`` transaction, committed on
success and rolled back on any exception, so an API request never leaves half a change behind.
Nested ``write()`` calls become savepoints. While the server runs, WAL checkpoints happen on a
second connection in a worker thread, never in a request's COMMIT (``checkpoint.py``).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import apsw
import apsw.bestpractice

from .. import clock
from . import search

SCHEMA_VERSION = 7
KEEP_SNAPSHOTS = 3      # snapshots taken before migrations, kept beside the file
log = logging.getLogger("ziti_lite")


class DatabaseRefused(Exception):
    """A file ziti-lite will not open: not SQLite, not ziti-lite's, or from a newer ziti-lite.
    The message is one line naming the problem and the fix."""


def schema_section(name: str) -> str:
    """The statements between ``-- @section NAME`` and ``-- @end NAME`` in schema.sql."""
    text = schema_sql()
    start, end = f"-- @section {name}\n", f"-- @end {name}\n"
    return text[text.index(start) + len(start):text.index(end)]


def _v1_to_v2_search_indexes(conn) -> None:
    """Version 2 adds the FTS5 trigram indexes behind contains/icontains filters (``search.py``):
    run schema.sql's search-indexes section, then index the rows already there."""
    conn.execute(schema_section("search-indexes"))
    for table in search.SEARCH_INDEXES:
        search.rebuild(conn, table)


def _v2_to_v3_audit(conn) -> None:
    """Version 3 adds the audit trail (``events/audit.py``): schema.sql's audit section."""
    conn.execute(schema_section("audit"))


def _v3_to_v4_oidc(conn) -> None:
    """Version 4 adds the OIDC provider's revocation list (``auth/oidc_tokens.py``): schema.sql's oidc section."""
    conn.execute(schema_section("oidc"))


def _v4_to_v5_audit_index(conn) -> None:
    """Version 5 drops the audit trail's index on created_at (``events/audit.py``): its rows'
    ids grow with time, and the index was a b-tree more to write in every audited change."""
    conn.execute("DROP INDEX IF EXISTS audit_log_created")


def _v5_to_v6_permissions(conn) -> None:
    """Version 6 adds identities' ``permissions`` (OpenZiti 2.0's permission model,
    ``ziti_lite/permissions.py``): every existing identity holds none, as before. Like the
    sections' ``IF NOT EXISTS``, a file that has the column already is left as it is."""
    if not any(c[1] == "permissions" for c in conn.execute("PRAGMA table_info(identities)")):
        conn.execute("ALTER TABLE identities ADD COLUMN permissions TEXT NOT NULL DEFAULT '[]'")


# version 7's new columns (OpenZiti 2.0's API): table -> column definitions, added in this order
V7_COLUMNS: dict[str, tuple[str, ...]] = {
    "identities": ("interfaces TEXT NOT NULL DEFAULT '[]'",),
    "authenticators": ("is_extend_requested INTEGER NOT NULL DEFAULT 0",
                       "is_key_roll_requested INTEGER NOT NULL DEFAULT 0",
                       "extend_requested_at TEXT",
                       "last_extend_rolled_keys INTEGER NOT NULL DEFAULT 0",
                       "last_auth_resolved_to_root INTEGER NOT NULL DEFAULT 0"),
    "api_sessions": ("improper_client_cert_chain INTEGER NOT NULL DEFAULT 0",),
    "external_jwt_signers": ("enroll_to_cert_enabled INTEGER NOT NULL DEFAULT 0",
                             "enroll_to_token_enabled INTEGER NOT NULL DEFAULT 0",
                             "enroll_name_claims_selector TEXT NOT NULL DEFAULT '/sub'",
                             "enroll_attribute_claims_selector TEXT NOT NULL DEFAULT ''",
                             "enroll_auth_policy_id TEXT NOT NULL DEFAULT 'default'"),
    "routers": ("ctrl_chan_listeners TEXT", "interfaces TEXT NOT NULL DEFAULT '[]'"),
}


def _v6_to_v7_api2(conn) -> None:
    """Version 7 adds the columns of OpenZiti 2.0's API (``V7_COLUMNS``: certificate extension
    on request, enrollment from an identity provider, routers' and identities' interfaces) and
    makes the revocation list the ``/revocations`` entity: the table is rebuilt from schema.sql's
    oidc section, every existing row a ``JTI`` revocation (what they were)."""
    for table, defs in V7_COLUMNS.items():
        have = {c[1] for c in conn.execute(f"PRAGMA table_info({table})")}
        for d in defs:
            if d.split()[0] not in have:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {d}")
    if not any(c[1] == "type" for c in conn.execute("PRAGMA table_info(revocations)")):
        conn.execute("ALTER TABLE revocations RENAME TO revocations_v6")
        conn.execute("DROP INDEX IF EXISTS revocations_expiry")
        conn.execute(schema_section("oidc"))
        conn.execute("INSERT INTO revocations (id, created_at, expires_at, updated_at)"
                     " SELECT id, created_at, expires_at, created_at FROM revocations_v6")
        conn.execute("DROP TABLE revocations_v6")


# version n -> the step that brings a version-n database to version n + 1 (in one transaction)
MIGRATIONS = {1: _v1_to_v2_search_indexes, 2: _v2_to_v3_audit, 3: _v3_to_v4_oidc, 4: _v4_to_v5_audit_index,
              5: _v5_to_v6_permissions, 6: _v6_to_v7_api2}


def schema_sql() -> str:
    here = Path(__file__).resolve().parents[2] / "schema.sql"
    if here.exists():
        return here.read_text()
    return resources.files("ziti_lite").joinpath("schema.sql").read_text()


def connect(path: str, statistics: bool = True) -> apsw.Connection:
    try:
        conn = apsw.Connection(path)
    except apsw.CantOpenError:
        where = os.path.dirname(os.path.abspath(path))
        why = f"no directory {where}" if not os.path.isdir(where) else "no permission"
        raise DatabaseRefused(f"cannot open {path} ({why}): give --db a path in a directory ziti-lite may write"
                              ) from None
    try:
        refusal(path, conn)   # before any setting: a file that is refused is left as it was
        _configure(conn, statistics)
    except apsw.NotADBError:
        conn.close()
        raise DatabaseRefused(f"{path} is not an SQLite database: give --db a ziti-lite database or a new file"
                              ) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _configure(conn: apsw.Connection, statistics: bool = True) -> None:
    conn.setbusytimeout(5000)  # first: the fixes below may need a lock other connections hold
    # apsw's recommended per-connection settings: WAL, foreign keys, busy timeout,
    # no double-quoted string literals, recursive triggers, optimize on close.
    for fix in apsw.bestpractice.recommended:
        if fix.__name__ == "connection_optimize" and not statistics:
            continue
        if fix.__name__.startswith("connection_"):
            try:
                fix(conn)
            except apsw.BusyError:
                # "PRAGMA optimize" may want to write statistics: on a database busy with
                # writers (a snapshot or check beside a live server) it is skipped, not fatal
                if fix.__name__ != "connection_optimize":
                    raise
    conn.setbusytimeout(5000)
    conn.execute("PRAGMA synchronous = NORMAL")
    # 64 MiB of page cache (the default is 2 MiB): at 100k identities one list request (count +
    # page + related rows) touches more pages than the default holds, and re-reading them from
    # the OS made a bare count(*) cost 0.4-0.9 ms instead of 11 µs
    conn.execute("PRAGMA cache_size = -65536")
    # the controller's clock in SQL (tests move it with clock.advance), in the stored format
    # (apsw's stub types every scalar function as taking *args; SQLite passes numargs of them)
    conn.create_scalar_function("zl_now", clock.stamp, 0, deterministic=False)  # type: ignore[arg-type]


def refusal(path: str, conn: apsw.Connection | None = None) -> None:
    """Raise ``DatabaseRefused`` for a file ziti-lite must not open: checked on a plain
    connection before any setting is applied (``connect`` checks its own connection so, which
    reads the schema once for both), so a foreign file is left exactly as it was (no WAL mode,
    no statistics tables)."""
    own = conn is None
    if own:
        if path in ("", ":memory:") or path.startswith("file:") or not os.path.exists(path):
            return
        try:
            conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.CantOpenError:
            return      # connect() says why
    assert conn is not None
    try:
        try:
            version = int(conn.pragma("user_version"))
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")]
        except apsw.NotADBError:
            raise DatabaseRefused(f"{path} is not an SQLite database: give --db a ziti-lite database or a new file"
                                  ) from None
        if version == 0 and names:
            raise DatabaseRefused(
                f"{path} is an SQLite file but not a ziti-lite database (it has tables such as"
                f" {', '.join(names[:3])} and no ziti-lite schema version): give --db a new file or a ziti-lite"
                " database")
        if version > SCHEMA_VERSION:
            raise DatabaseRefused(
                f"{path} was written by a newer ziti-lite (schema version {version}; this one opens versions up to"
                f" {SCHEMA_VERSION}): upgrade ziti-lite, or start this one from a snapshot the upgrade left beside"
                f" it ({path}.pre-*)")
        if version and "controller" not in names:
            raise DatabaseRefused(
                f"{path} has schema version {version} but no controller table: it is not a ziti-lite database;"
                " give --db a ziti-lite database or a new file")
    finally:
        if own:
            conn.close()


# (data_version, total_changes, rollbacks): see Store.generation
Generation = tuple[int, int, int]


class Store:
    def __init__(self, path: str, statistics: bool = True):
        """``statistics``: let ``PRAGMA optimize`` analyze tables as this connection opens; a
        second connection of a serving process (the embedded router's) does not: statistics
        written there at start-up, of nearly empty tables, steered the API's plans badly once the
        tables grew (list pages and searches at half speed after 10,000 identities were created).
        The API's connection keeps them current while serving (``refresh_statistics``)."""
        self.path = path
        self.conn = connect(path, statistics)
        self._depth = 0
        self._lock = threading.RLock()
        self._columns: dict[str, tuple] = {}
        self._counts: tuple[tuple, dict] = ((), {})   # (generation, {(sql, params): count})
        self._rollbacks = 0   # rolled back writes, which leave data_version and total_changes as they were
        self.before_write = None   # called before each outermost BEGIN (the WAL checkpointer)
        # functions to run once the current outermost transaction commits (``after_commit``);
        # a savepoint's share is dropped when it rolls back, the whole list on a ROLLBACK
        self._after_commit: list = []
        # ids of routers online in this process (the embedded edge router), for filters
        self.online_routers: set[str] = set()
        self.conn.create_scalar_function("zl_router_online", self._router_online, 1)  # type: ignore[arg-type]
        try:
            self.migrate()
        except BaseException:
            self.conn.close()
            raise

    def _router_online(self, rid: str) -> int:
        """SQL ``zl_router_online(id)``: 1 when the router is online in this process."""
        return int(rid in self.online_routers)

    # -- schema ---------------------------------------------------------------------------
    def migrate(self) -> bool:
        """Create the schema on a new file, or bring an older file up to SCHEMA_VERSION. Returns
        True when the file was new.

        Before an older file changes, a snapshot of it is written beside it
        (``PATH.pre-<version>-<UTC time>``, the last ``KEEP_SNAPSHOTS`` kept) and named in the
        log; every step then runs in one transaction, so a failing step leaves the file as it
        was. Tables, indexes and triggers ziti-lite does not know (a backup or replication
        tool's) are left alone. A file that is not a ziti-lite database, or one written by a
        newer ziti-lite, is refused (``DatabaseRefused``) before anything is written."""
        version = self._version()
        if version == 0:
            with self.write():
                self.conn.execute(schema_sql())
                self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            return True
        if version == SCHEMA_VERSION:
            return False
        snapshot = self.snapshot_before_migration(version)
        if snapshot:
            log.warning("migrating %s from schema version %d to %d; its previous state is in %s",
                        self.path, version, SCHEMA_VERSION, snapshot)
        with self.write():
            # read again inside the write lock: another process may have migrated meanwhile
            version = self.conn.pragma("user_version")
            while version < SCHEMA_VERSION:
                MIGRATIONS[version](self.conn)
                version += 1
            self.conn.execute(f"PRAGMA user_version = {version}")
        return False

    def _version(self) -> int:
        """The file's schema version (``PRAGMA user_version``; 0: a new file)."""
        return int(self.conn.pragma("user_version"))

    def snapshot_before_migration(self, version: int) -> str | None:
        """Write ``PATH.pre-<version>-<time>`` (a consistent copy, ``snapshot``) and remove all
        but the newest ``KEEP_SNAPSHOTS`` of them; returns its path (None for an in-memory
        database)."""
        if self.path in ("", ":memory:") or self.path.startswith("file:"):
            return None
        stamp = clock.now().strftime("%Y%m%dT%H%M%S%fZ")
        out = f"{self.path}.pre-{version}-{stamp}"
        self.snapshot(out)
        older = sorted(glob.glob(glob.escape(self.path) + ".pre-*-*"), key=os.path.getmtime)
        for stale in older[:-KEEP_SNAPSHOTS]:
            with contextlib.suppress(OSError):
                os.remove(stale)
        return out

    # -- reads ----------------------------------------------------------------------------
    def _names(self, sql: str, cur) -> tuple | None:
        """Column names of a statement, cached per SQL text (``getdescription()`` costs as much
        as a point read; the schema does not change under a running process). None when the
        statement has already completed without a row."""
        names = self._columns.get(sql)
        if names is None:
            try:
                names = tuple(d[0] for d in cur.getdescription())
            except apsw.ExecutionCompleteError:
                return None
            if len(self._columns) >= 4096:  # filtered lists make many SQL texts: stay bounded
                self._columns.clear()
            self._columns[sql] = names
        return names

    def one(self, sql: str, params: Any = ()) -> dict | None:
        cur = self.conn.execute(sql, params)
        names = self._names(sql, cur)
        if names is None:
            return None  # no row
        row = cur.fetchone()
        cur.close()
        return None if row is None else dict(zip(names, row))

    def all(self, sql: str, params: Any = ()) -> list[dict]:
        cur = self.conn.execute(sql, params)
        names = self._names(sql, cur)
        if names is None:
            return []
        return [dict(zip(names, r)) for r in cur]

    def generation(self) -> Generation:
        """What moves whenever the database may have changed: ``PRAGMA data_version`` when
        another connection (another process) commits, ``total_changes()`` when this one writes,
        and the count of rolled back writes (what a cache saw inside one is gone). ~1.6 µs: the
        key of the caches of derived answers."""
        conn = self.conn
        return (conn.execute("PRAGMA data_version").fetchone()[0],  # type: ignore[index]
                conn.total_changes(), self._rollbacks)

    def refresh_statistics(self) -> None:
        """``PRAGMA optimize`` over every table (mask 0x10002, as at open): analyze those whose
        size moved far from their statistics (SQLite bounds the work), as SQLite advises for
        connections open for long; a cheap check when nothing moved."""
        try:
            self.conn.execute("PRAGMA optimize(0x10002)")
        except apsw.BusyError:
            pass   # another connection is writing: the next call does it

    def count(self, sql: str, params: Any = ()) -> int:
        """``value`` of a ``count(*)`` query, remembered until the database changes: a list page
        of a large table counts all its rows on every request (12 µs at 100k identities, the
        same again for each page a console polls) while nothing was written."""
        gen = self.generation()
        held, counts = self._counts
        if held != gen:
            counts = {}
            self._counts = (gen, counts)
        key = (sql, tuple(params))
        n = counts.get(key)
        if n is None:
            n = self.value(sql, params)
            if len(counts) < 1024:
                counts[key] = n
        return n

    def value(self, sql: str, params: Any = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def column(self, sql: str, params: Any = ()) -> list:
        return [r[0] for r in self.conn.execute(sql, params)]

    def execute(self, sql: str, params: Any = ()) -> None:
        self.conn.execute(sql, params)

    def executemany(self, sql: str, seq: Any) -> None:
        self.conn.executemany(sql, seq)

    # -- writes ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self) -> Iterator[Store]:
        with self._lock:
            if self._depth:
                name = f"sp{self._depth}"
                self.conn.execute(f"SAVEPOINT {name}")
                self._depth += 1
                mark = len(self._after_commit)
                try:
                    yield self
                except BaseException:
                    self.conn.execute(f"ROLLBACK TO {name}; RELEASE {name}")
                    self._rollbacks += 1
                    del self._after_commit[mark:]
                    raise
                else:
                    self.conn.execute(f"RELEASE {name}")
                finally:
                    self._depth -= 1
                return
            if self.before_write is not None:
                self.before_write()
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            self._after_commit.clear()   # left over from a COMMIT that failed
            try:
                yield self
            except BaseException:
                self.conn.execute("ROLLBACK")
                self._rollbacks += 1
                self._after_commit.clear()
                raise
            else:
                self.conn.execute("COMMIT")
            finally:
                self._depth = 0
            if self._after_commit:
                done, self._after_commit = self._after_commit, []
                for fn in done:
                    fn()

    @property
    def writing(self) -> bool:
        """Inside a ``write()`` (statements run in its transaction)."""
        return self._depth > 0

    def after_commit(self, fn) -> None:
        """Run ``fn()`` once the write under way commits, never if it rolls back (what it
        announces did not happen); at once outside a write. Events use it: a change is published
        only when it is in the file."""
        if self._depth:
            self._after_commit.append(fn)
        else:
            fn()

    def snapshot(self, out: str) -> None:
        """A consistent copy of the live database (SQLite online backup API), finished whatever
        other connections write meanwhile.

        The copy is one backup step (``step(-1)``): it reads every page inside one read
        transaction, so it sees one committed state and never restarts. Copying in small steps
        instead lets writers in between, and a write by another connection restarts the backup
        from the first page, forever under continuous writes. In WAL mode writers go on while
        the step reads; the log only cannot be rewound until it ends."""
        dest = apsw.Connection(out)
        try:
            with dest.backup("main", self.conn, "main") as b:
                # a step that cannot get its read lock (another connection checkpointing or
                # writing its schema statistics) answers BUSY at once, without the busy handler:
                # it is retried, as SQLite documents, for up to the busy timeout
                for attempt in range(250):
                    try:
                        b.step(-1)
                        break
                    except apsw.BusyError:
                        if attempt == 249:
                            raise
                        time.sleep(0.02)
                if not b.done:  # cannot happen with -1 unless SQLite changes: fail loudly, no half copy
                    raise RuntimeError("snapshot: the backup did not complete in one step")
        finally:
            dest.close()

    def close(self) -> None:
        self.conn.close()
