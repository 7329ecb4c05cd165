"""``make chaos``: what a hostile network and a careless operator do to a real ``ziti-lite serve``
on loopback, measured (not part of ``make test``).

1. idle: 1,100 TLS connections that send nothing, against a server under ``ulimit -n 1024``;
   a new client's ``/version`` latency while they are held and after the deadline, and how
   much the log grew (bars: served within 1 s once the deadline passes; log < 100 KB);
2. logins: 200 concurrent bad logins while a good client polls ``/version`` (bar: p99 < 100 ms)
   and a good login during the flood (bar: < 500 ms); how many got 429;
3. kill: 10 rounds of kill -9 while 4 clients create identities; every acknowledged create
   must be there after the restart (bar: 0 lost);
4. snapshot: a 40 MiB database with 4 writing clients: ``ziti-lite snapshot``,
   ``POST /database/snapshot`` and the integrity fix (bar: < 10 s each);
5. shutdown: SIGTERM with an idle keep-alive client: time to exit, and the WAL checkpointed.

Usage: python benchmarks/chaos.py [--only idle,logins,kill,snapshot,shutdown]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx  # noqa: E402
from common import ROOT, free_port, wait_ready  # noqa: E402

PASSWORD = "Chaos-Passw0rd"
MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"


def _ctx() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def start(db: Path, log_path: Path, *extra: str, nofile: int | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()

    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    log = open(log_path, "ab")
    proc = subprocess.Popen([sys.executable, "-m", "ziti_lite", "serve", "--db", str(db), "--port", str(port),
                             "--admin-password", PASSWORD, "--edge-port", "0", "--ctrl-port", "0", *extra],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=limit, env={**os.environ, "PYTHONPATH": str(ROOT)})
    origin = f"https://127.0.0.1:{port}"
    wait_ready(origin, proc)
    return proc, origin


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> float:
    t = time.perf_counter()
    proc.send_signal(sig)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return time.perf_counter() - t


def token(client: httpx.Client, origin: str, prefix: str = MGMT) -> str:
    r = client.post(origin + prefix + "/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
    r.raise_for_status()
    return r.json()["data"]["token"]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")


def timed_get(url: str) -> float:
    t = time.perf_counter()
    with httpx.Client(verify=False, timeout=30) as c:
        c.get(url).raise_for_status()
    return time.perf_counter() - t


# ====================================================================== 1. idle connections
def idle(tmp: Path, out: dict) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    log = tmp / "idle.log"
    proc, origin = start(tmp / "idle.db", log, nofile=1024)
    size0 = log.stat().st_size
    socks, failed = [], 0
    ctx = _ctx()
    t0 = time.perf_counter()
    for _ in range(1100):
        try:
            raw = socket.create_connection(("127.0.0.1", int(origin.rsplit(":", 1)[1])), timeout=5)
            socks.append(ctx.wrap_socket(raw, server_hostname="localhost"))
        except OSError:
            failed += 1
    opened = time.perf_counter() - t0
    during = timed_get(origin + "/version")
    time.sleep(5.5)  # the request deadline (5 s) passes for every idle connection
    after = [timed_get(origin + "/version") for _ in range(5)]
    closed = 0
    for s in socks:
        s.settimeout(0.01)
        try:
            if not s.recv(1):
                closed += 1
        except (ConnectionError, ssl.SSLError):
            closed += 1
        except (TimeoutError, OSError):
            pass
        s.close()
    growth = log.stat().st_size - size0
    stop(proc)
    out["idle"] = {"opened": len(socks), "refused_or_failed": failed, "open_seconds": round(opened, 2),
                   "new_client_during_s": round(during, 3), "new_client_after_deadline_max_s": round(max(after), 3),
                   "closed_by_server": closed, "log_growth_bytes": growth}
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ====================================================================== 2. login flood
def logins(tmp: Path, out: dict) -> None:
    proc, origin = start(tmp / "logins.db", tmp / "logins.log")
    stop_poll = threading.Event()
    polls: list[float] = []

    def poll():
        with httpx.Client(verify=False, timeout=30) as c:
            while not stop_poll.is_set():
                t = time.perf_counter()
                c.get(origin + "/version")
                polls.append(time.perf_counter() - t)
                time.sleep(0.01)
    poller = threading.Thread(target=poll)
    poller.start()
    # the flood runs in its own process, so that its 200 threads do not take the GIL from the
    # measuring threads here
    # the good client runs in a process of its own too: a new httpx client builds an SSL context
    # and handshakes while holding its process's GIL, which a poller beside it would count as latency
    gooder = subprocess.Popen([sys.executable, __file__, "--good", origin], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert gooder.stdout.readline().strip() == "ready"
    flood = subprocess.Popen([sys.executable, __file__, "--flood", origin], stdout=subprocess.PIPE, text=True)
    assert flood.stdout.readline().strip() == "ready"
    polls.clear()
    time.sleep(0.05)
    good = json.loads(gooder.communicate("go\n")[0])
    codes = json.loads(flood.communicate()[0])
    stop_poll.set()
    poller.join()
    stop(proc)
    out["logins"] = {"version_polls": len(polls), "version_p50_ms": round(statistics.median(polls) * 1000, 1),
                     "version_p99_ms": round(pct(polls, 0.99) * 1000, 1),
                     "version_max_ms": round(max(polls) * 1000, 1),
                     "good_logins_s_status": good,
                     "bad_login_answers": {str(c): codes.count(c) for c in sorted(set(codes))}}


# ====================================================================== 3. kill -9
def kill(tmp: Path, out: dict) -> None:
    db, log = tmp / "kill.db", tmp / "kill.log"
    acked: list[str] = []
    lock = threading.Lock()
    errors = 0
    for round_ in range(10):
        proc, origin = start(db, log)
        with httpx.Client(verify=False, timeout=10) as c:
            tok = token(c, origin)
        stop_writing = threading.Event()

        def write(w):
            nonlocal errors
            with httpx.Client(verify=False, timeout=10) as c:
                i = 0
                while not stop_writing.is_set():
                    name = f"r{round_}-w{w}-{i}"
                    i += 1
                    try:
                        r = c.post(origin + MGMT + "/identities", headers={"zt-session": tok},
                                   json={"name": name, "type": "User", "isAdmin": False})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 201:
                        with lock:
                            acked.append(name)
                    else:
                        errors += 1
        writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in writers:
            t.start()
        time.sleep(random.uniform(0.5, 1.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stop_writing.set()
        for t in writers:
            t.join()
    import apsw
    conn = apsw.Connection(str(db))
    present = {r[0] for r in conn.execute("SELECT name FROM identities")}
    conn.close()
    lost = [n for n in acked if n not in present]
    out["kill"] = {"rounds": 10, "acknowledged_creates": len(acked), "lost": len(lost), "non_201": errors}


# ====================================================================== 4. snapshot under writes
def fill(db: Path, mib: int) -> None:
    import apsw
    conn = apsw.Connection(str(db))
    conn.setbusytimeout(5000)
    conn.execute("CREATE TABLE IF NOT EXISTS chaos_fill (id INTEGER PRIMARY KEY, data BLOB)")
    with conn:
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
                     " INSERT INTO chaos_fill (data) SELECT randomblob(4000) FROM n", (mib * 256,))
    conn.close()


def snapshot(tmp: Path, out: dict) -> None:
    db, log = tmp / "snap.db", tmp / "snap.log"
    proc, origin = start(db, log)
    stop(proc)
    fill(db, 40)
    proc, origin = start(db, log)
    with httpx.Client(verify=False, timeout=30) as c:
        tok = token(c, origin)
    stop_writing = threading.Event()
    writes = [0]

    def write(w):
        with httpx.Client(verify=False, timeout=30) as c:
            i = 0
            while not stop_writing.is_set():
                r = c.post(origin + MGMT + "/identities", headers={"zt-session": tok},
                           json={"name": f"s-w{w}-{i}", "type": "User", "isAdmin": False})
                i += 1
                if r.status_code == 201:
                    writes[0] += 1
    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in writers:
        t.start()
    time.sleep(1)
    size = db.stat().st_size
    t = time.perf_counter()
    cli = subprocess.run([sys.executable, "-m", "ziti_lite", "snapshot", "--db", str(db), str(tmp / "cli-snap.db")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    cli_s = time.perf_counter() - t
    with httpx.Client(verify=False, timeout=600) as c:
        # the fix snapshots first (to <db>-<second>): each of the two makes its own copy
        t = time.perf_counter()
        c.post(origin + MGMT + "/database/fix-data-integrity", headers={"zt-session": tok}).raise_for_status()
        while True:
            job = c.get(origin + MGMT + "/database/data-integrity-results", headers={"zt-session": tok}).json()["data"]
            if not job["inProgress"]:
                break
            time.sleep(0.05)
        fix_s = time.perf_counter() - t
        time.sleep(1.1)
        t = time.perf_counter()
        r = c.post(origin + MGMT + "/database/snapshot", headers={"zt-session": tok})
        api_s = time.perf_counter() - t
        api_status = r.status_code
    stop_writing.set()
    for t_ in writers:
        t_.join()
    stop(proc)
    out["snapshot"] = {"db_mib": round(size / 2**20, 1), "writes_during": writes[0],
                       "cli_snapshot_s": round(cli_s, 2), "cli_exit": cli.returncode,
                       "api_snapshot_s": round(api_s, 2), "api_status": api_status,
                       "integrity_fix_s": round(fix_s, 2), "integrity_fix_error": job["error"]}


# ====================================================================== 5. shutdown
def shutdown(tmp: Path, out: dict) -> None:
    db, log = tmp / "down.db", tmp / "down.log"
    proc, origin = start(db, log)
    c = httpx.Client(verify=False, timeout=30)
    tok = token(c, origin)
    c.post(origin + MGMT + "/identities", headers={"zt-session": tok},
           json={"name": "before-stop", "type": "User", "isAdmin": False}).raise_for_status()
    seconds = stop(proc)  # c keeps its idle keep-alive connection open
    c.close()
    wal = Path(str(db) + "-wal")
    out["shutdown"] = {"seconds_with_idle_keepalive_client": round(seconds, 2), "exit": proc.returncode,
                       "wal_bytes_after": wal.stat().st_size if wal.exists() else 0}


PARTS = {"idle": idle, "logins": logins, "kill": kill, "snapshot": snapshot, "shutdown": shutdown}


def flood_main(origin: str) -> None:
    """200 bad logins at once, each on a new TLS connection; prints the statuses as JSON."""
    codes: list[int] = []
    go = threading.Event()

    def bad():
        go.wait()
        with httpx.Client(verify=False, timeout=60) as c:
            r = c.post(origin + CLIENT + "/authenticate?method=password",
                       json={"username": "admin", "password": "wrong-password"})
            codes.append(r.status_code)
    threads = [threading.Thread(target=bad) for _ in range(200)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    go.set()
    for t in threads:
        t.join()
    print(json.dumps(codes))


def good_main(origin: str) -> None:
    """Three good logins, one after the other, each on a new connection, once a line arrives on
    stdin; prints (seconds, status) of each."""
    print("ready", flush=True)
    sys.stdin.readline()
    good = []
    for _ in range(3):
        t = time.perf_counter()
        with httpx.Client(verify=False, timeout=60) as c:
            r = c.post(origin + CLIENT + "/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
        good.append((round(time.perf_counter() - t, 3), r.status_code))
    print(json.dumps(good))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(PARTS))
    ap.add_argument("--flood", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--good", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.flood:
        return flood_main(args.flood)
    if args.good:
        return good_main(args.good)
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="ziti-lite-chaos-") as d:
        for name in args.only.split(","):
            t = time.perf_counter()
            PARTS[name](Path(d), out)
            out[name]["part_seconds"] = round(time.perf_counter() - t, 1)
            print(name, json.dumps(out[name]), flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
