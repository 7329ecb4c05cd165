"""One serving process per database file.

A server keeps an exclusive ``flock`` on ``<db>.lock`` next to the database for as long as it
runs; a second ``ziti-lite serve`` on the same file finds it held and refuses to start, because
the two would keep diverging in-memory state (posture data, activity, traces). The lock is
advisory and released by the kernel when the process ends, however it ends (kill -9 included),
so a stale lock file never blocks a restart. ``snapshot`` and ``check`` do not take it: they are
meant to run next to a live server.
"""

from __future__ import annotations

import fcntl
import os


class DatabaseInUse(RuntimeError):
    pass


def lock_path(db: str) -> str:
    return os.path.abspath(db) + ".lock"


def acquire(db: str) -> int:
    """Hold the serving lock of ``db``; returns the descriptor (closing it releases the lock).
    Raises :class:`DatabaseInUse` when another process holds it."""
    path = lock_path(db)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise DatabaseInUse(
            f"{db} is already being served by another ziti-lite process{who}"
            f" (lock {path}); stop it first, or use `ziti-lite snapshot` to copy the live database"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def release(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
