"""``--events FILE``: JSON lines, one event a line, to a file with size-based rotation or to
stdout (``-``).

The event loop never writes: ``offer`` appends to a bounded in-memory queue and a writer thread
drains it. A slow or full disk (or a FIFO nobody reads) therefore blocks only that thread; once
the queue holds ``limit`` lines, new events are dropped and counted (``Bus.dropped``, shown in
``/metrics``) instead of waiting. Rotation: when the file would pass ``max_bytes`` it becomes
``FILE.1`` (``FILE.1`` becomes ``FILE.2``, ...), ``keep`` old files are kept.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import stat
import sys
import threading
import time
from typing import IO

from .bus import Subscriber

log = logging.getLogger("ziti_lite.events")
BATCH_SECONDS = 0.05


class FileSink(Subscriber):
    kind = "file"

    def __init__(self, path: str, types: frozenset[str] | None = None, max_bytes: int = 10 << 20, keep: int = 5,
                 limit: int = 10_000):
        self.path = path
        self.types = types
        self.max_bytes = max_bytes
        self.keep = keep
        self.limit = limit
        self.queue: collections.deque[bytes] = collections.deque()
        self.written = 0
        self.lost = 0                       # lines a failed write lost (a full disk); counted as drops
        self._error_logged = 0.0
        self._wake = threading.Event()
        self._stop = False
        self._out: IO[bytes] | None = None
        self._size = 0
        self._regular = False
        self._thread = threading.Thread(target=self._run, name="ziti-lite-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def offer(self, namespace: str, line: bytes, event: dict) -> bool:
        if len(self.queue) >= self.limit:
            return False
        self.queue.append(line)
        if not self._wake.is_set():   # one wake-up per batch: set() takes a lock and notifies
            self._wake.set()
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds: a blocked file is left behind)."""
        self._stop = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the writer thread ------------------------------------------------------------------
    def _open(self) -> IO[bytes]:
        if self.path == "-":
            return sys.stdout.buffer
        # unbuffered: a batch is one write() of its own, so a failed one (a full disk) leaves
        # nothing behind in a buffer to fail again at the next write or at close
        out = open(self.path, "ab", buffering=0)   # noqa: SIM115 - kept open across writes, closed on rotation
        st = os.fstat(out.fileno())
        self._regular = stat.S_ISREG(st.st_mode)   # a FIFO or a device is never rotated
        self._size = st.st_size if self._regular else 0
        return out

    def _rotate(self) -> None:
        assert self._out is not None
        self._out.close()
        for n in range(self.keep - 1, 0, -1):
            older = f"{self.path}.{n}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{n + 1}")
        if self.keep > 0:
            os.replace(self.path, f"{self.path}.1")
        else:
            os.remove(self.path)
        self._out = self._open()

    def _run(self) -> None:
        try:
            self._out = self._open()
        except OSError as e:
            log.error("events: cannot open %s: %s; events to it are dropped", self.path, e)
            self.limit = 0
            self.queue.clear()
            return
        while True:
            self._wake.wait(1.0)
            if not self._stop:
                # gather for a moment: one write and flush per batch, not per event (each wake-up
                # takes the GIL from the event loop)
                time.sleep(BATCH_SECONDS)
            self._wake.clear()
            batch = []
            while self.queue:
                batch.append(self.queue.popleft())
            if batch:
                self._write(batch)
            if self._stop and not self.queue:
                break
        if self._out is not None and self.path != "-":
            with contextlib.suppress(OSError):
                self._out.close()

    def _put(self, chunk: list[bytes]) -> None:
        assert self._out is not None
        data = memoryview(b"".join(chunk))
        while data:
            n = self._out.write(data)
            data = data[n or 0:]
        self._out.flush()

    def _write(self, batch: list[bytes]) -> None:
        chunk: list[bytes] = []
        before = self.written
        try:
            for line in batch:
                if self._regular and self._size and self._size + len(line) + 1 > self.max_bytes:
                    self._put(chunk)
                    self.written += len(chunk) // 2
                    chunk = []
                    self._rotate()
                chunk += (line, b"\n")
                self._size += len(line) + 1
            self._put(chunk)
            self.written += len(chunk) // 2
        except OSError as e:  # a full disk: these lines are lost, the next batch tries again
            self.lost += len(batch) - (self.written - before)
            now = time.monotonic()
            if now - self._error_logged >= 60:
                self._error_logged = now
                log.error("events: writing %s failed: %s (%d lines lost so far)", self.path, e, self.lost)
