"""WAL checkpoints off the request path.

SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past 1,000 pages. A
typical service-policy write adds ~1,900 pages (link rows spread over several indexes), so that
COMMIT copied the log into the database file, with two fsyncs, on nearly every policy write.
While the server runs (the app's lifespan) the serving connection's automatic checkpoint is off
and a :class:`Checkpointer` does the work:

* a WAL hook on the serving connection (a comparison per COMMIT, on the loop) wakes a worker
  thread each time ``PAGES`` more frames have been committed;
* the thread, on its own connection (WAL lets a checkpointer run beside readers and a writer;
  apsw releases the GIL while SQLite works), runs a PASSIVE checkpoint: it copies the committed
  frames into the database file and takes no lock a request needs;
* SQLite rewinds the log to its start (so the file stops growing) when a write transaction
  begins after a pass has copied everything. With any pause between writes that just happens.
  With writes back to back, each one begins while the pass for the one before is still
  copying, and the log would grow without bound. So once the log holds ``REWIND_PAGES`` frames,
  the next write (``Store.before_write``) first waits for the running pass to finish and then
  rewinds the log; ``journal_size_limit`` trims the file back. That wait is about one policy
  write's copy (a few tens of ms), and a write waits only when the pass has at most
  ``BIG_COMMIT`` frames to copy. A commit of more (a policy for ``#all`` identities: ~16,000)
  is the one that waits, after its COMMIT, for its own frames to be copied: that write is slow
  anyway, and the writes after it neither wait for the copy nor share its I/O; the next one
  rewinds the log. So does a commit that takes the log to ``MAX_PAGES`` (the bound, should the
  passes fall behind). No checkpoint ever takes the write lock while serving, so a long
  transaction or a slow reader (a snapshot) never makes a request wait for the checkpointer;
  while such a reader holds an old snapshot, SQLite cannot rewind and the log grows until it ends.

``stop()`` (lifespan shutdown: Ctrl-C, SIGTERM, the end of a TestClient block) joins the thread
after a final TRUNCATE checkpoint, so every committed row is in the database file and the WAL is
empty, and gives the serving connection SQLite's automatic checkpoint back: CLI commands and
tests that keep using a Store outside a lifespan behave as before.

Litestream (continuous replication, README) reads the log before anything is copied out of it,
holds a read transaction so nobody restarts it meanwhile, and runs its own checkpoints. So while
serving only PASSIVE checkpoints run here, which copy frames up to its read mark and never wait
for it or restart the log. On a file Litestream replicates (its ``_litestream_seq`` table is
there) the shutdown's checkpoint is PASSIVE too: a TRUNCATE would wait ``FINAL_BUSY_MS`` for
Litestream's read lock and give up, or restart the log under it.
"""

from __future__ import annotations

import logging
import threading

import apsw

log = logging.getLogger("ziti_lite.checkpoint")

PAGES = 1000                    # wake the thread after this many new WAL frames (SQLite's default)
REWIND_PAGES = 16384            # from this log length (64 MiB of 4 KiB pages) writes wait to rewind it
BIG_COMMIT = 4096               # a commit of more frames waits for its own copy
MAX_PAGES = 32768               # so does one that takes the log this far (the bound)
SIZE_LIMIT = 64 * 1024 * 1024   # journal_size_limit: the WAL file is trimmed to this on a rewind
MAX_WAIT_S = 2.0                # the longest a write waits for a pass (only a stalled disk takes that)
FINAL_BUSY_MS = 5000            # the checkpoint at shutdown may wait this long for other connections
SQLITE_AUTOCHECKPOINT = 1000


def replicated(conn: apsw.Connection) -> bool:
    """Litestream replicates this file: its ``_litestream_seq`` table is there (it makes it when it
    first syncs the file)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_litestream_seq'").fetchone() is not None


class Checkpointer:
    """Checkpoints ``store``'s WAL from a worker thread while started (see the module doc)."""

    def __init__(self, store, pages: int | None = None, rewind_pages: int | None = None,
                 max_pages: int | None = None):
        self.store = store
        self.pages = pages or PAGES
        self.rewind_pages = rewind_pages or REWIND_PAGES
        self.max_pages = max_pages or MAX_PAGES
        self._wake = threading.Event()     # set by the hook: a pass is wanted
        self._idle = threading.Event()     # clear while a pass is wanted or running
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._users = 0                    # start() calls not yet matched by stop()
        # loop side only (the WAL hook and before_write)
        self._seen = 0                     # log length (frames) at the last wake-up
        self._pages = 0                    # log length after the last commit
        self._rewind = False               # the next write should wait for the pass
        self._fresh = False                # the write under way began with everything copied
        # what the thread has done, for tests and diagnostics
        self.passes = 0                    # passive checkpoints run
        self.waits = 0                     # writes that waited for a pass, to rewind the log
        self.busy = 0                      # checkpoints SQLite answered busy
        self.last: tuple[int, int] | None = None    # (frames in the log, frames copied) last seen
        self.final: tuple[int, int] | None = None   # the same, after the shutdown checkpoint

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> bool:
        """Hand checkpoints to the worker thread; False (and nothing changed) when the database
        is not in WAL mode or cannot be opened a second time. Calls nest (two TestClients on one
        app run two lifespans at once): the thread runs until the matching last ``stop()``."""
        if self._thread is not None:
            self._users += 1
            return True
        if str(self.store.value("PRAGMA journal_mode")).lower() != "wal":
            return False
        try:
            worker = apsw.Connection(self.store.path, flags=apsw.SQLITE_OPEN_READWRITE)
            # a connection that has not read the file yet counts as not in WAL mode: its
            # checkpoints would do nothing
            worker.execute("PRAGMA journal_mode").fetchall()
        except apsw.Error:
            log.exception("checkpointer: cannot open %s; SQLite keeps checkpointing in COMMIT", self.store.path)
            return False
        conn = self.store.conn
        self._stopping, self._seen, self._pages, self._rewind, self._fresh = False, 0, 0, False, False
        self._wake.clear()
        self._idle.set()
        conn.execute(f"PRAGMA journal_size_limit = {int(SIZE_LIMIT)}")
        conn.wal_autocheckpoint(0)
        conn.set_wal_hook(self._committed)
        self.store.before_write = self._before_write
        self._thread = threading.Thread(target=self._run, args=(worker,), name="ziti-lite-checkpoint", daemon=True)
        self._thread.start()
        self._users = 1
        return True

    def stop(self) -> None:
        """Final TRUNCATE checkpoint, join the thread, automatic checkpoints back on."""
        thread = self._thread
        if thread is None:
            return
        self._users -= 1
        if self._users > 0:
            return
        self.store.before_write = None
        self._stopping = True
        self._wake.set()
        thread.join()
        self._thread = None
        try:
            self.store.conn.set_wal_hook(None)
            self.store.conn.wal_autocheckpoint(SQLITE_AUTOCHECKPOINT)
        except apsw.ConnectionClosedError:
            pass

    # ------------------------------------------------------------------ serving connection side
    def _committed(self, conn, name: str, pages: int) -> int:
        """SQLite's WAL hook, after each COMMIT on the serving connection; ``pages`` is the log's
        length in frames."""
        last = self.last                   # of the last pass the thread finished
        if self._fresh or pages <= self._pages:
            self._seen = copied = added = 0    # the log was rewound: all of it is this commit's
        else:
            copied = last[1] if last and last[0] <= pages else 0
            added = self._pages
        added, self._pages, self._fresh = pages - added, pages, False
        self._rewind = pages >= self.rewind_pages and pages - copied <= BIG_COMMIT
        drain = added > BIG_COMMIT or pages >= self.max_pages
        if self._rewind or drain or pages - self._seen >= self.pages:
            self._seen = pages
            self._idle.clear()
            self._wake.set()
        if drain:
            # a huge commit (or the log at its bound): this write, slow already, waits while its
            # frames are copied (its locks are released), so that the writes after it neither
            # wait for that copy nor share its I/O; the next one rewinds the log
            self.waits += 1
            self._idle.wait(MAX_WAIT_S)
        return apsw.SQLITE_OK

    def _before_write(self) -> None:
        """Before a write transaction begins: when the log is long, let the running pass finish
        first, so that this write finds everything copied and rewinds the log."""
        if self._rewind and not self._idle.is_set():
            self.waits += 1
            self._idle.wait(MAX_WAIT_S)
        # SQLite rewinds the log in this write when every frame had been copied when it began
        last = self.last
        self._fresh = self._idle.is_set() and last is not None and last[0] == last[1] == self._pages

    # ------------------------------------------------------------------ worker thread
    def _run(self, conn: apsw.Connection) -> None:
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    break
                self._checkpoint(conn, apsw.SQLITE_CHECKPOINT_PASSIVE)
                if not self._wake.is_set():
                    self._idle.set()
            self._idle.set()
            conn.setbusytimeout(FINAL_BUSY_MS)
            self._checkpoint(conn, apsw.SQLITE_CHECKPOINT_PASSIVE)
            if replicated(conn):
                log.info("WAL checkpoint at shutdown: Litestream replicates this file, so the log is left to it")
                self.final = self.last
            else:
                self.final = self._checkpoint(conn, apsw.SQLITE_CHECKPOINT_TRUNCATE)
        finally:
            conn.close()

    def _checkpoint(self, conn: apsw.Connection, mode: int) -> tuple[int, int] | None:
        try:
            self.last = conn.wal_checkpoint(mode=mode)
            if mode == apsw.SQLITE_CHECKPOINT_PASSIVE:
                self.passes += 1
            return self.last
        except apsw.BusyError:             # another connection is checkpointing, or (TRUNCATE
            self.busy += 1                 # at shutdown) another one is still reading or writing
            if mode == apsw.SQLITE_CHECKPOINT_TRUNCATE:
                log.warning("WAL checkpoint at shutdown: database busy; the log is kept (no data is lost)")
        except apsw.Error:
            log.exception("WAL checkpoint failed")
        return None
