"""``ziti-lite restore --db PATH SNAPSHOT``: a snapshot put back in place of a stopped server's file.

The order keeps every step undoable:

1. the serving lock of PATH (``db/lock.py``) is taken and held: a server running on PATH would
   go on writing its own state over the restored file, so the restore is refused (one line);
2. SNAPSHOT is checked on a read-only connection: an SQLite file, a ziti-lite database (schema
   version and controller table), not written by a newer ziti-lite, and clean under SQLite's
   ``PRAGMA integrity_check``; an older ziti-lite's snapshot is accepted: the server upgrades it
   at its next start as any older file (writing a ``PATH.pre-*`` snapshot first);
3. it is copied beside PATH (``PATH.restoring``, SQLite's backup API: any ``-wal`` beside the
   snapshot is read too, as Litestream's restored files may have) and flushed to disk;
4. PATH and its ``-wal``/``-shm`` are renamed together to ``PATH.replaced-<UTC time>`` (the log
   holds committed rows of a killed server: the set-aside file keeps them), then checkpointed so
   the set-aside file stands alone where it can be;
5. the copy is renamed to PATH.

The controller's PKI is in the file, so the restored controller is the same controller to its
routers and SDKs; whatever was written after the snapshot is gone (README, "Backups and disaster
recovery").
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from dataclasses import dataclass

import apsw

from ..db import lock as dblock
from ..db.store import SCHEMA_VERSION
from .schedule import fsync_dir

SIDE_FILES = ("-wal", "-shm")


class RestoreRefused(Exception):
    """Nothing was changed; the message is one line naming the problem and the fix."""


@dataclass
class Restored:
    db: str
    snapshot: str
    version: int          # the snapshot's schema version
    identities: int
    routers: int
    aside: str | None     # where the replaced file went (None: there was none)

    @property
    def upgrade(self) -> bool:
        return self.version < SCHEMA_VERSION


def inspect(snapshot: str) -> tuple[int, int, int]:
    """(schema version, identities, routers) of a snapshot ziti-lite can restore; RestoreRefused
    otherwise."""
    try:
        conn = apsw.Connection(snapshot, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as e:
        raise RestoreRefused(f"cannot open {snapshot}: {e}") from None
    try:
        try:
            version = int(conn.pragma("user_version"))
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        except apsw.NotADBError:
            raise RestoreRefused(f"{snapshot} is not an SQLite database: give restore a file written by"
                                 " `ziti-lite snapshot`, serve --snapshot-every or `litestream restore`") from None
        if version == 0 or "controller" not in names:
            raise RestoreRefused(f"{snapshot} is not a ziti-lite database (no ziti-lite schema version or no"
                                 " controller table): give restore a snapshot of a ziti-lite controller")
        if version > SCHEMA_VERSION:
            raise RestoreRefused(f"{snapshot} was written by a newer ziti-lite (schema version {version}; this one"
                                 f" opens versions up to {SCHEMA_VERSION}): restore it with that ziti-lite, or"
                                 " upgrade this one first")
        problems = [r[0] for r in conn.execute("PRAGMA integrity_check(5)")]
        if problems != ["ok"]:
            first = " ".join(" ".join(problems).replace("*** in database main ***", "").split())
            raise RestoreRefused(f"{snapshot} fails SQLite's integrity check ({first[:200]}): restore an older"
                                 " snapshot or another copy")
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] if t in names else 0   # type: ignore[index]
                  for t in ("identities", "routers")]
        return version, counts[0], counts[1]
    except apsw.Error as e:
        raise RestoreRefused(f"{snapshot} cannot be read ({type(e).__name__}: {e}): restore another copy") from None
    finally:
        conn.close()


def restore(db: str, snapshot: str, now: dt.datetime | None = None) -> Restored:
    """Put ``snapshot`` in place of ``db`` (see the module doc); RestoreRefused leaves both as they were."""
    if os.path.exists(db) and os.path.samefile(db, snapshot):
        raise RestoreRefused(f"{snapshot} is the database itself: give restore a snapshot of it")
    folder = os.path.dirname(os.path.abspath(db))
    if not os.path.isdir(folder):
        raise RestoreRefused(f"no directory {folder}: create it first, or give --db a path in an existing folder")
    try:
        held = dblock.acquire(db)
    except dblock.DatabaseInUse as e:
        who = str(e).split(" (lock")[0]
        raise RestoreRefused(f"{who}: stop that server first (it would write its own state over the restored file),"
                             " then run restore again") from None
    try:
        version, identities, routers = inspect(snapshot)
        staged = db + ".restoring"
        try:
            _copy(snapshot, staged)
        except (OSError, apsw.Error) as e:
            raise RestoreRefused(f"cannot write the restored copy beside {db} ({e}): free space there or give"
                                 " ziti-lite write permission; nothing was changed") from None
        try:
            aside = _set_aside(db, now or dt.datetime.now(dt.UTC))
            os.replace(staged, db)
            fsync_dir(folder)
        except OSError as e:
            raise RestoreRefused(f"the restore stopped half way ({e}): the snapshot's copy is {staged}, the old"
                                 f" file {db} or {db}.replaced-*; put one of them at {db} by hand") from None
    finally:
        dblock.release(held)
    return Restored(db, snapshot, version, identities, routers, aside)


def _copy(snapshot: str, staged: str) -> None:
    for stale in (staged, *(staged + s for s in (*SIDE_FILES, "-journal"))):
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)
    src = apsw.Connection(snapshot, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        dest = apsw.Connection(staged)
        try:
            with dest.backup("main", src, "main") as b:
                b.step(-1)
        finally:
            dest.close()
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(staged)
        raise
    finally:
        src.close()
    fd = os.open(staged, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _set_aside(db: str, now: dt.datetime) -> str | None:
    """Rename ``db`` and its log files to ``db.replaced-<time>``; None when there was no file."""
    if not os.path.exists(db):
        for side in SIDE_FILES:   # a log without its database is of no use to the restored file
            with contextlib.suppress(FileNotFoundError):
                os.remove(db + side)
        return None
    aside = f"{db}.replaced-{now.strftime('%Y%m%dT%H%M%SZ')}"
    os.replace(db, aside)
    for side in SIDE_FILES:
        if os.path.exists(db + side):
            os.replace(db + side, aside + side)
    if os.path.exists(aside + "-wal"):
        # copy the log's committed rows into the set-aside file, so it stands alone; a file that is
        # no database (or is damaged) keeps its log beside it, under its new name
        with contextlib.suppress(apsw.Error):
            conn = apsw.Connection(aside)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA journal_mode = DELETE")
            finally:
                conn.close()
    return aside
