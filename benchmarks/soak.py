"""``make soak``: a long mixed load against one ``ziti-lite serve``, watching for drift.

A controller seeded with ``--count`` identities (``seed.py``) is served on a loopback port; then
``--clients`` asyncio + httpx keep-alive clients run a mix for ``--minutes``: point reads, lists
(plain, ``contains`` filter, deep offset), identity create / patch / delete, password logins and
``/version``. Every ``--every`` seconds it prints req/s, p50/p99, 5xx and transport errors, the
server's RSS and CPU, and the slowest ``/version`` answer (an event-loop stall shows there).
At the end the data integrity check runs (``ziti-lite check``) and the run fails on any 5xx,
on an integrity problem, or when RSS grew by more than ``--max-rss-growth`` MiB after warm-up.

    .venv/bin/python benchmarks/soak.py [--minutes 3] [--count 20000] [--clients 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import seed as seeding  # noqa: E402

from benchmarks import common  # noqa: E402

MGMT = "/edge/management/v1"
MIX = (  # (weight, kind)
    (40, "detail"), (15, "list"), (8, "contains"), (4, "deep"), (10, "create"), (8, "patch"),
    (5, "delete"), (2, "login"), (8, "version"),
)


def rss_cpu(pid: int) -> tuple[float, float]:
    """Resident set (MiB) and CPU seconds of a process (Linux /proc)."""
    try:
        rss = 0.0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return rss, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan"), float("nan")


class Stats:
    def __init__(self) -> None:
        self.lat: list[float] = []
        self.version_max = 0.0
        self.status: Counter = Counter()
        self.errors = 0

    def reset(self) -> Stats:
        old = Stats()
        old.lat, old.version_max, old.status, old.errors = self.lat, self.version_max, self.status, self.errors
        self.__init__()
        return old


async def client(i: int, base: str, token: str, ids: list[str], until: float, stats: Stats, created: list[str]) -> None:
    rnd = random.Random(i)
    kinds = [k for w, k in MIX for _ in range(w)]
    h = {"zt-session": token}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(base_url=base, verify=False, limits=limits, timeout=30.0) as c:
        while time.monotonic() < until:
            kind = rnd.choice(kinds)
            t0 = time.perf_counter()
            try:
                if kind == "detail":
                    r = await c.get(f"{MGMT}/identities/{rnd.choice(ids)}", headers=h)
                elif kind == "list":
                    r = await c.get(f"{MGMT}/identities?limit=25&offset={rnd.randrange(0, 500)}", headers=h)
                elif kind == "contains":
                    needle = rnd.choice(("ax", "ra", "smith", "-vm-", "zz"))
                    r = await c.get(f"{MGMT}/identities?filter=" + quote(f'name contains "{needle}"'), headers=h)
                elif kind == "deep":
                    r = await c.get(f"{MGMT}/identities?limit=10&offset={rnd.randrange(0, len(ids))}", headers=h)
                elif kind == "create":
                    r = await c.post(f"{MGMT}/identities", headers=h, json={
                        "name": f"soak-{i}-{rnd.getrandbits(48):x}", "type": "User", "isAdmin": False,
                        "roleAttributes": rnd.sample(seeding.ATTRS, 2)})
                    if r.status_code == 201:
                        created.append(r.json()["data"]["id"])
                elif kind == "patch" and created:
                    r = await c.patch(f"{MGMT}/identities/{rnd.choice(created)}", headers=h,
                                      json={"roleAttributes": rnd.sample(seeding.ATTRS, 3), "tags": {"n": rnd.random()}})
                elif kind == "delete" and created:
                    r = await c.delete(f"{MGMT}/identities/{created.pop(rnd.randrange(len(created)))}", headers=h)
                elif kind == "login":
                    r = await c.post(f"{MGMT}/authenticate?method=password",
                                     json={"username": seeding.ADMIN_USER, "password": seeding.ADMIN_PASSWORD})
                else:
                    r = await c.get("/edge/client/v1/version")
                dt = time.perf_counter() - t0
                if kind == "version":
                    stats.version_max = max(stats.version_max, dt)
                stats.lat.append(dt)
                stats.status[r.status_code // 100 * 100] += 1
                if r.status_code >= 500:
                    print(f"  5xx: {kind} -> {r.status_code} {r.text[:200]}", flush=True)
            except httpx.HTTPError as e:
                stats.errors += 1
                if stats.errors < 5:
                    print(f"  transport error on {kind}: {e!r}", flush=True)


async def drive(base: str, token: str, ids: list[str], a, pid: int) -> tuple[Counter, int, list[float]]:
    stats = Stats()
    created: list[str] = []
    until = time.monotonic() + a.minutes * 60
    tasks = [asyncio.create_task(client(i, base, token, ids, until, stats, created)) for i in range(a.clients)]
    totals: Counter = Counter()
    errors = 0
    rss_series: list[float] = []
    last_cpu = rss_cpu(pid)[1]
    t_last = time.monotonic()
    print(f"{'t':>5} {'req/s':>7} {'p50':>7} {'p99':>7} {'max /version':>12} {'2xx':>6} {'4xx':>5} {'5xx':>4}"
          f" {'err':>4} {'RSS MiB':>8} {'CPU %':>6}")
    start = time.monotonic()
    while any(not t.done() for t in tasks):
        await asyncio.sleep(min(a.every, max(0.1, until - time.monotonic() + 0.5)))
        now = time.monotonic()
        s = stats.reset()
        rss, cpu = rss_cpu(pid)
        rss_series.append(rss)
        lat = sorted(s.lat)
        q = (lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3) if lat else (lambda p: float("nan"))
        span = now - t_last
        print(f"{now - start:5.0f} {len(lat) / span:7.0f} {q(.5):6.1f}ms {q(.99):6.1f}ms {s.version_max * 1e3:10.1f}ms"
              f" {s.status[200]:6d} {s.status[400]:5d} {s.status[500]:4d} {s.errors:4d} {rss:8.1f}"
              f" {(cpu - last_cpu) / span * 100:6.0f}", flush=True)
        totals.update(s.status)
        errors += s.errors
        last_cpu, t_last = cpu, now
    await asyncio.gather(*tasks)
    return totals, errors, rss_series


def main() -> None:
    ap = argparse.ArgumentParser(description="long mixed load against ziti-lite")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--count", type=int, default=20_000, help="identities to seed")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between reports")
    ap.add_argument("--max-rss-growth", type=float, default=64.0, help="MiB allowed after the first report")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-soak-"))
    db = str(tmp / "soak.db")
    s = seeding.seed(db, a.count)
    print(f"seeded {s['identities']} identities; soaking for {a.minutes:g} min with {a.clients} clients")
    port = common.free_port()
    log = open(tmp / "server.log", "wb")
    proc = common.start_server(db, port, log)
    base = f"https://127.0.0.1:{port}"
    ok = False
    try:
        common.wait_ready(base, proc)
        token = common.login(base + MGMT, seeding.ADMIN_USER, seeding.ADMIN_PASSWORD)
        import apsw
        c = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
        ids = [row[0] for row in c.execute("SELECT id FROM identities WHERE is_default_admin = 0")]
        c.close()
        totals, errors, rss = asyncio.run(drive(base, token, ids, a, proc.pid))
        growth = (max(rss[1:]) - rss[0]) if len(rss) > 1 else 0.0
        print(f"\ntotal: {sum(totals.values())} requests: 2xx {totals[200]}, 4xx {totals[400]}, 5xx {totals[500]},"
              f" transport errors {errors}; RSS {rss[0]:.0f} -> {rss[-1]:.0f} MiB (max growth {growth:.0f} MiB)")
    finally:
        common.stop_server(proc)
        log.close()
    check = subprocess.run([sys.executable, "-m", "ziti_lite", "check", "--db", db], cwd=ROOT,
                           capture_output=True, text=True)
    print("integrity check:", (check.stdout.strip().splitlines() or ["?"])[-1])
    unhandled = (tmp / "server.log").read_text(errors="replace").count("unhandled error")
    ok = totals[500] == 0 and errors == 0 and check.returncode == 0 and unhandled == 0 and growth <= a.max_rss_growth
    print("soak OK" if ok else f"soak FAILED (server log: {unhandled} unhandled errors; kept {tmp})")
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
