"""What the benchmark, fuzz and soak scripts share.

* ``new_row`` / ``insert_rows``: entity rows inserted straight through SQL (``client_bench.py``,
  ``policy_bench.py``);
* ``median_p99`` and ``scratch_db`` (a database file in a temporary directory, removed afterwards
  unless kept) for the in-process benchmarks;
* ``free_port``, ``start_server``, ``wait_ready``, ``login`` and ``stop_server`` for the scripts
  that run ``ziti-lite serve`` in a subprocess (``fuzz.py``, ``soak.py``).

Standard library only at import time: ``fuzz.py`` is also loaded by schemathesis as its hooks
file, and logs in again from there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ====================================================================== in-process benchmarks
def new_row(name: str, **cols) -> dict:
    """The base columns of a new entity named ``name``, plus ``cols``."""
    from ziti_lite import clock
    from ziti_lite.ids import new_id
    now = clock.stamp()
    return {"id": new_id(), "created_at": now, "updated_at": now, "name": name, **cols}


def insert_rows(store, table: str, rows: list[dict]) -> None:
    cols = list(rows[0])
    store.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                      [tuple(r[c] for c in cols) for r in rows])


def median_p99(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s), s[min(len(s) - 1, int(len(s) * 0.99))]


@contextlib.contextmanager
def scratch_db(db: str | None, keep: bool, prefix: str, name: str) -> Iterator[str]:
    """``db``, or a new file in a temporary directory when None; refuses an existing file.
    Afterwards the file and its -wal/-shm (and the directory) are removed unless ``keep``."""
    tmp = None
    if db is None:
        tmp = tempfile.mkdtemp(prefix=prefix)
        db = os.path.join(tmp, name)
    elif os.path.exists(db):
        sys.exit(f"{db} exists: give a new file")
    try:
        yield db
    finally:
        if not keep:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    os.remove(db + suffix)
            if tmp:
                os.rmdir(tmp)


# ====================================================================== a served controller
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db, port: int, log, *extra: str) -> subprocess.Popen:
    """``ziti-lite serve`` on a loopback port, its output going to the open binary file ``log``."""
    return subprocess.Popen([sys.executable, "-m", "ziti_lite", "serve", "--db", str(db), "--port", str(port),
                             "--ctrl-port", "0", *extra, "--log-level", "warning"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def wait_ready(origin: str, proc: subprocess.Popen) -> None:
    """Poll ``/version`` until the server answers (about 30 s at most)."""
    ctx = _unverified()
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit("ziti-lite exited during start-up")
        try:
            urllib.request.urlopen(f"{origin}/version", context=ctx, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("ziti-lite did not start")


def login(base: str, username: str, password: str) -> str:
    """A password login on ``base`` (an API prefix URL); returns the session token."""
    req = urllib.request.Request(f"{base}/authenticate?method=password", method="POST",
                                 data=json.dumps({"username": username, "password": password}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, context=_unverified(), timeout=10) as r:
        return json.load(r)["data"]["token"]


def stop_server(proc: subprocess.Popen) -> None:
    """Ctrl-C, as an operator would (the server checkpoints and exits); killed after 10 s."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def write_rows(path: str | None, section: str, rows: list[dict]) -> None:
    """A benchmark's ``--json FILE``: its figures as rows of ``make bench``'s one table
    (``table.py``). A row: ``name``, ``value`` (ziti-lite), ``baseline`` (what it is compared with,
    from the same run), ``ratio``, ``goal``, ``met`` (True/False/None)."""
    if not path:
        return
    Path(path).write_text(json.dumps({"section": section, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                      "loadavg": os.getloadavg(), "rows": rows}, indent=1))


def row(name: str, value: str, baseline: str = "", ratio: float | None = None, goal: str = "",
        met: bool | None = None) -> dict:
    return {"name": name, "value": value, "baseline": baseline,
            "ratio": None if ratio is None else round(ratio, 2), "goal": goal, "met": met}
