"""Timed snapshots of a serving controller (``serve --snapshot-every``).

A worker thread wakes when the next snapshot is due and writes one as ``ziti-lite snapshot``
does (``Store.snapshot``: SQLite's online backup in one step, on a connection of its own, so it
reads one committed state while the API goes on writing; apsw releases the interpreter lock
while SQLite copies). The file is written under a hidden ``.partial`` name, flushed to disk and
renamed into place, so a snapshot in the folder is always whole; its name is the database's
stem and the UTC time it was taken (``net-20261129T054200.123Z.db``), and the oldest beyond
``keep`` are removed after each one.

The schedule counts from the newest snapshot already in the folder, so restarting the server
neither skips one nor takes an extra one; with none there, or the newest older than the interval,
the first is taken at start. A failure (a full disk, a missing folder, no permission) is logged
once with its fix, counted, and retried within a minute; the server keeps serving, and a
success after failures is logged too. A folder named with ``--snapshot-dir`` that does not exist
is a failure, not created: it is often the mount point of a backup disk, and writing the
snapshots onto the root disk instead would hide that the disk is gone. The default folder,
``snapshots`` beside the database, is created.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import apsw

from ..db.store import Store

log = logging.getLogger("ziti_lite.snapshots")

RETRY_S = 60.0          # a failed snapshot is tried again after this long (or the interval, if shorter)
STOP_WAIT_S = 10.0      # shutdown waits this long for a snapshot being written
_STAMP = re.compile(r"-(\d{8}T\d{6}\.\d{3}Z)\.db$")


def default_folder(db: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(db)), "snapshots")


def stem(db: str) -> str:
    """The name snapshots of ``db`` start with: its file name without ``.db``/``.sqlite``."""
    name = os.path.basename(db)
    for ext in (".db", ".sqlite3", ".sqlite"):
        if name.endswith(ext) and len(name) > len(ext):
            return name[: -len(ext)]
    return name


def snapshot_name(db: str, when: float) -> str:
    t = dt.datetime.fromtimestamp(when, dt.UTC)
    return f"{stem(db)}-{t.strftime('%Y%m%dT%H%M%S')}.{t.microsecond // 1000:03d}Z.db"


def taken_at(name: str) -> float | None:
    """The time in a snapshot's name (unix seconds), None for a name that is not one."""
    m = _STAMP.search(name)
    if m is None:
        return None
    return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def listing(folder: str, db: str) -> list[str]:
    """The snapshots of ``db`` in ``folder``, oldest first (their names sort by time)."""
    mine = re.compile(re.escape(stem(db)) + r"-\d{8}T\d{6}\.\d{3}Z\.db")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if mine.fullmatch(n))


def prune(folder: str, db: str, keep: int) -> list[str]:
    """Remove all but the newest ``keep`` snapshots of ``db``; the names removed."""
    gone = listing(folder, db)[:-keep] if keep > 0 else []
    for name in gone:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, name))
    return gone


def fsync_dir(folder: str) -> None:
    """Make a rename or removal in ``folder`` durable (the directory's own entry)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(db: str, folder: str, when: float) -> str:
    """One consistent snapshot of ``db`` into ``folder``, whole or not at all; its path."""
    final = os.path.join(folder, snapshot_name(db, when))
    partial = os.path.join(folder, "." + os.path.basename(final) + ".partial")
    store = Store(db, statistics=False)
    try:
        store.snapshot(partial)
        fd = os.open(partial, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, final)
        fsync_dir(folder)
    except BaseException:
        for leftover in (partial, partial + "-journal"):
            with contextlib.suppress(OSError):
                os.remove(leftover)
        raise
    finally:
        store.close()
    return final


def explain(e: BaseException, folder: str) -> str:
    """One line: what went wrong and what fixes it."""
    if isinstance(e, apsw.FullError) or getattr(e, "errno", None) == errno.ENOSPC:
        return f"the disk of {folder} is full: free space there, or give --snapshot-dir a folder on a larger disk"
    if isinstance(e, FileNotFoundError) or getattr(e, "errno", None) == errno.ENOENT:
        return (f"{folder} does not exist: create it (or mount the backup disk it stands for), or give"
                " --snapshot-dir an existing folder")
    if isinstance(e, PermissionError | apsw.CantOpenError | apsw.ReadOnlyError) or \
            getattr(e, "errno", None) in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"ziti-lite may not write to {folder}: give it write permission, or give --snapshot-dir another folder"
    return f"{type(e).__name__}: {e} (snapshots go to {folder})"


@dataclass
class Outcome:
    ok: bool
    path: str | None = None
    seconds: float = 0.0
    error: str | None = None


class Snapshotter:
    """Takes a snapshot of ``db`` every ``every`` seconds into ``folder`` (default: ``snapshots``
    beside the database), keeping the newest ``keep``; ``start``/``stop`` run its thread, ``take``
    one snapshot now. Its counters are read by ``/metrics`` and ``/health-checks``."""

    def __init__(self, db: str, every: float, folder: str | None = None, keep: int = 24,
                 now: Callable[[], float] = time.time):
        self.db, self.every, self.keep, self.now = db, every, keep, now
        self.explicit = folder is not None
        self.folder = os.path.abspath(folder) if folder is not None else default_folder(db)
        self.ok = 0                          # snapshots written by this process
        self.failed = 0                      # attempts that failed
        self.last_good: float | None = None  # when the newest snapshot in the folder was taken
        self.last_path: str | None = None
        self.last_seconds: float | None = None   # how long the last good one took to write
        self.error: str | None = None        # the last attempt's failure, None once one succeeds
        self.failing_since: float | None = None
        self.running = False                 # a snapshot is being written
        self._last_attempt = 0.0
        self._logged: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ schedule
    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._find_newest()
        self._remove_partials()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ziti-lite-snapshots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(STOP_WAIT_S)
            if thread.is_alive():
                log.warning("a snapshot was still being written at shutdown; its partial file is removed at the"
                            " next start")

    def due(self) -> float:
        """When the next attempt is due (unix time)."""
        if self.error is not None and self.failing_since is not None:
            return self._last_attempt + min(self.every, RETRY_S)
        return (self.last_good or 0.0) + self.every

    def _run(self) -> None:
        while not self._stop.wait(max(0.0, self.due() - self.now())):
            self.take()

    def _find_newest(self) -> None:
        names = listing(self.folder, self.db)
        if names:
            self.last_good = taken_at(names[-1])
            self.last_path = os.path.join(self.folder, names[-1])

    def _remove_partials(self) -> None:
        prefix = "." + stem(self.db) + "-"
        with contextlib.suppress(OSError):
            for name in os.listdir(self.folder):
                if name.startswith(prefix) and ".partial" in name:
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(self.folder, name))

    # ------------------------------------------------------------------ one snapshot
    def take(self) -> Outcome:
        """Write one snapshot now and prune; never raises (a failure is reported and counted)."""
        when = self._last_attempt = self.now()
        self.running = True
        t0 = time.perf_counter()
        try:
            if not self.explicit:
                os.makedirs(self.folder, exist_ok=True)
            elif not os.path.isdir(self.folder):
                raise FileNotFoundError(errno.ENOENT, "no such directory", self.folder)
            path = write_snapshot(self.db, self.folder, when)
            prune(self.folder, self.db, self.keep)
        except Exception as e:
            return self._failed(e)
        finally:
            self.running = False
        took = time.perf_counter() - t0
        self.ok += 1
        self.last_good, self.last_path, self.last_seconds = when, path, took
        if self.error is not None:
            log.warning("snapshots work again: %s written in %.2f s", path, took)
        else:
            log.info("snapshot %s written in %.2f s", path, took)
        self.error = self.failing_since = self._logged = None
        return Outcome(True, path, took)

    def _failed(self, e: Exception) -> Outcome:
        self.failed += 1
        message = explain(e, self.folder)
        self.error = message
        if self.failing_since is None:
            self.failing_since = self._last_attempt
        if message != self._logged:   # once per kind of failure, not at every retry
            log.error("snapshot of %s failed: %s (the server keeps serving; tried again every %.0f s)",
                      self.db, message, min(self.every, RETRY_S))
            self._logged = message
        return Outcome(False, error=message)

    # ------------------------------------------------------------------ what observers read
    def age(self) -> float | None:
        """Seconds since the newest good snapshot was taken (None: there is none)."""
        return None if self.last_good is None else max(0.0, self.now() - self.last_good)

    def health(self) -> str:
        """The health check's details; raises RuntimeError while failing or overdue."""
        if self.error is not None:
            raise RuntimeError(f"the last snapshot failed: {self.error}")
        age = self.age()
        plan = f"every {_duration(self.every)}, keeping {self.keep} in {self.folder}"
        if age is None:
            return f"no snapshot yet: the first is being written ({plan})"
        if age > 2 * self.every + (self.last_seconds or 0.0) + 60:
            raise RuntimeError(f"the newest snapshot is {_duration(age)} old, more than twice the interval ({plan})")
        return f"newest snapshot {os.path.basename(self.last_path or '')}, {_duration(age)} old ({plan})"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
