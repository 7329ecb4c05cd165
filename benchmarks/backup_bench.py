"""Backup and recovery figures (issue 39): the recovery point, the recovery time, and what a
timed snapshot costs the requests served meanwhile.

1. **Recovery point with Litestream** (``litestream`` v0.3.13, found or installed as ``make
   interop`` does, ``tests/interop/recovery.py``): ziti-lite under ``litestream replicate -exec``
   with a file replica, sync interval 1 s; identities created at a steady 50 writes/s for 10 s;
   ``kill -9`` of both at a random phase; the files deleted; ``litestream restore``; served again.
   Per round: writes acknowledged, writes lost, and how long before the kill the oldest lost one
   was acknowledged.
2. **Recovery time**: from the start of ``ziti-lite restore`` to the API answering ``/version``
   (a fresh network, and the 200,000-identity file), and, with a real v2.0.3 router enrolled
   before the snapshot (when the binary is at hand), to that router online again.
3. **Cost of a timed snapshot**: ``serve --snapshot-every 5s`` on the 200,000-identity file
   (``seed.py``), one client at a paced 20 reads (a page of identities) and 20 writes (an identity
   created) a second for 30 s; each request's latency, split by whether a snapshot was being
   written meanwhile (the snapshots' start and end read from their files), against the same
   load on a server without snapshots.

    .venv/bin/python benchmarks/backup_bench.py [--only rpo,rto,cost] [--rounds 3] [--identities 200000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import median_p99, row, write_rows  # noqa: E402
from benchmarks.seed import ADMIN_PASSWORD, ADMIN_USER, seed  # noqa: E402
from tests.interop import recovery  # noqa: E402
from ziti_lite import testing  # noqa: E402

MGMT = "/edge/management/v1"
CACHE = Path(__file__).resolve().parent / ".cache"


def fresh(folder: Path) -> tuple[Path, str]:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "net.db"
    testing.make_template(db, ADMIN_USER, ADMIN_PASSWORD)
    ca = folder / "ca.pem"
    ca.write_text(testing.ca_bundle(db))
    return db, str(ca)


# ---------------------------------------------------------------------------------- 1. recovery point
def rpo(tmp: Path, rounds: int, out: dict) -> None:
    litestream, why = recovery.litestream_binary()
    if litestream is None:
        print(f"recovery point: skipped ({why})")
        return
    results = []
    for n in range(rounds):
        folder = tmp / f"rpo-{n}"
        db, ca = fresh(folder / "box")
        config = recovery.write_config(folder / "litestream.yml", db, folder / "replica")
        port = testing.free_port()
        url = f"https://127.0.0.1:{port}"
        proc = recovery.replicate(litestream, config, recovery.serve_args(db, port), folder / "replicate.log")
        try:
            recovery.wait_ready(url, ca, proc)
            writer = recovery.Writer(testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(folder)))
            writer.start()
            time.sleep(10 + random.random())
            killed_at = time.monotonic()
            proc.kill9()
            writer.stop()
        finally:
            proc.stop()
        for f in db.parent.glob("net.db*"):
            f.unlink()
        shutil.rmtree(db.parent / ".net.db-litestream", ignore_errors=True)
        r = recovery.restore(litestream, config, db)
        assert r.returncode == 0, r.stderr
        served = recovery.start(recovery.serve_args(db, port), folder / "restored.log")
        try:
            recovery.wait_ready(url, ca, served)
            names = recovery.names(testing.Management(url, ca, ADMIN_USER, ADMIN_PASSWORD, str(folder)), "w")
        finally:
            served.stop()
        missing = recovery.lost(writer.acked, names, killed_at)
        oldest = max((s for _, s in missing), default=0.0)
        results.append((len(writer.acked), len(missing), oldest))
        print(f"recovery point, round {n + 1}: {len(writer.acked)} writes acknowledged, {len(missing)} lost,"
              f" the oldest lost acknowledged {oldest:.2f} s before the kill")
    out["rpo"] = results


# ---------------------------------------------------------------------------------- 2. recovery time
def restore_and_serve(snapshot: Path, folder: Path, port: int, ca: str, ctrl_port: int = 0) -> tuple[
        float, float, recovery.Process, float]:
    """(restore s, restore start -> API answering s, the server, t0 of the restore)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "net.db"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ziti_lite", "restore", "--db", str(db), str(snapshot)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    restored = time.monotonic() - t0
    proc = recovery.start(recovery.serve_args(db, port, "127.0.0.1", ctrl_port), folder / "serve.log")
    recovery.wait_ready(f"https://127.0.0.1:{port}", ca, proc, timeout=120)
    return restored, time.monotonic() - t0, proc, t0


def rto(tmp: Path, big: Path | None, out: dict) -> None:
    rows = []
    for label, source in (("fresh network", None), ("200k identities", big)):
        if label != "fresh network" and source is None:
            continue
        folder = tmp / f"rto-{len(rows)}"
        if source is None:
            source, ca = fresh(folder / "origin")
        else:
            ca = str(folder / "ca.pem")
            folder.mkdir(parents=True)
            Path(ca).write_text(testing.ca_bundle(source))
        snapshot = folder / "snapshot.db"
        subprocess.run([sys.executable, "-m", "ziti_lite", "snapshot", "--db", str(source), str(snapshot)],
                       check=True, capture_output=True, timeout=600)
        restored, answering, proc, _ = restore_and_serve(snapshot, folder / "new", testing.free_port(), ca)
        proc.stop()
        size = snapshot.stat().st_size / 2**20
        rows.append((label, size, restored, answering))
        print(f"recovery time, {label} ({size:.0f} MiB): restore {restored:.2f} s, API answering"
              f" {answering:.2f} s after restore began")
    out["rto"] = rows
    router = rto_router(tmp / "rto-router")
    if router is not None:
        out["rto_router"] = router


def rto_router(folder: Path) -> tuple[float, float] | None:
    from tests.interop.conftest import find_binary
    from tests.interop.real_router import RealRouter, wait_online
    ziti = find_binary("v2.0.3")
    if ziti is None:
        print("recovery time with a real router: skipped (no ziti v2.0.3 binary)")
        return None
    db, ca = fresh(folder / "old")
    port, ctrl = testing.free_port(), testing.free_port()
    old = recovery.start(recovery.serve_args(db, port, "127.0.0.1", ctrl), folder / "old.log")
    router = None
    try:
        recovery.wait_ready(f"https://127.0.0.1:{port}", ca, old)
        admin = _Admin(testing.Management(f"https://127.0.0.1:{port}", ca, ADMIN_USER, ADMIN_PASSWORD, str(folder)))
        router = RealRouter(ziti, folder, "bench-router", ctrl, admin)
        router.enroll()
        router.start()
        wait_online(admin, router.id, timeout=30)
        snapshot = folder / "snapshot.db"
        subprocess.run([sys.executable, "-m", "ziti_lite", "snapshot", "--db", str(db), str(snapshot)], check=True,
                       capture_output=True, timeout=60)
        old.kill9()
        _, answering, new, t0 = restore_and_serve(snapshot, folder / "new", port, ca, ctrl)
        try:
            admin = _Admin(testing.Management(f"https://127.0.0.1:{port}", ca, ADMIN_USER, ADMIN_PASSWORD,
                                              str(folder)))
            wait_online(admin, router.id, timeout=60)
            online = time.monotonic() - t0
        finally:
            new.stop()
        print(f"recovery time with a real v2.0.3 router: API answering {answering:.2f} s, router online"
              f" {online:.2f} s after restore began")
        return answering, online
    finally:
        if router is not None:
            router.stop()
        old.stop()


class _Admin:
    def __init__(self, api: testing.Management):
        self.api = api

    def create(self, collection: str, body: dict) -> str:
        return self.api.create(collection, body)

    def get(self, path: str):
        reply = self.api.get(path)
        return type("Reply", (), {"json": lambda _self: reply.body})()


# ---------------------------------------------------------------------------------- 3. snapshot cost
def seeded(identities: int) -> Path:
    CACHE.mkdir(exist_ok=True)
    db = CACHE / f"backup-{identities}.db"
    if not db.exists():
        t0 = time.perf_counter()
        part = db.with_suffix(".partial")
        for stale in CACHE.glob(part.name + "*"):
            stale.unlink()
        seed(str(part), identities)
        part.rename(db)
        print(f"seeded {identities} identities in {time.perf_counter() - t0:.0f} s: {db}")
    return db


def load(port: int, seconds: float) -> list[tuple[float, float, str]]:
    """Paced reads and writes for ``seconds``: [(start, latency, kind)]."""
    ctx = ssl._create_unverified_context()  # noqa: S323 - loopback, the controller's own PKI
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    body = json.dumps({"username": ADMIN_USER, "password": ADMIN_PASSWORD})
    conn.request("POST", MGMT + "/authenticate?method=password", body, {"content-type": "application/json"})
    token = json.loads(conn.getresponse().read())["data"]["token"]
    h = {"zt-session": token, "content-type": "application/json"}
    samples = []
    t0, n = time.monotonic(), 0
    while time.monotonic() - t0 < seconds:
        kind = "read" if n % 2 == 0 else "write"
        start, c0 = time.time(), time.perf_counter()
        if kind == "read":
            conn.request("GET", MGMT + "/identities?limit=10", headers=h)
        else:
            conn.request("POST", MGMT + "/identities",
                         json.dumps({"name": f"cost-{port}-{n}", "type": "User", "isAdmin": False}), h)
        r = conn.getresponse()
        r.read()
        assert r.status in (200, 201), r.status
        samples.append((start, time.perf_counter() - c0, kind))
        n += 1
        delay = t0 + n / 40.0 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    conn.close()
    return samples


def written(folder: Path, db: Path) -> list[tuple[float, float]]:
    """(start, duration) of each snapshot in ``folder``: its name's time, its file's last change
    (it is renamed into place when whole). Read from the files, not /metrics: a /metrics request
    on 200,000 identities scans their certificates' ends and would stall the requests measured."""
    from ziti_lite.backup import schedule
    out = []
    for name in schedule.listing(str(folder), str(db)):
        start = schedule.taken_at(name) or 0.0
        out.append((start, (folder / name).stat().st_mtime - start))
    return out


def cost(tmp: Path, big: Path, seconds: float, out: dict) -> None:
    figures = {}
    for label, extra in (("no snapshots", ()), ("--snapshot-every 5s", ("--snapshot-every", "5s", "--snapshot-dir",
                                                                       str(tmp / "snaps"), "--snapshot-keep", "100"))):
        shutil.rmtree(tmp / "snaps", ignore_errors=True)
        (tmp / "snaps").mkdir()
        db = tmp / "cost.db"
        for f in tmp.glob("cost.db*"):
            f.unlink()
        shutil.copyfile(big, db)
        with open(db, "rb+") as f:     # the copy's dirty pages on disk first: not a request's fsync's to wait for
            os.fsync(f.fileno())
        port = testing.free_port()
        proc = recovery.start(recovery.serve_args(db, port, "127.0.0.1", 0, *extra), tmp / "cost.log")
        try:
            recovery.wait_ready(f"https://127.0.0.1:{port}", str(_ca(db, tmp)), proc, timeout=120)
            samples = load(port, seconds)
        finally:
            proc.stop()
        snaps = written(tmp / "snaps", db)
        during = [s for s in samples if any(a <= s[0] + s[1] and s[0] <= a + d for a, d in snaps)]
        apart = [s for s in samples if s not in during]
        figures[label] = {"all": samples, "during": during, "apart": apart, "snapshots": snaps}
        for part, rows_ in (("all", samples), ("during a snapshot", during), ("no snapshot running", apart)):
            for kind in ("read", "write"):
                lat = [s[1] for s in rows_ if s[2] == kind]
                if lat:
                    p50, p99 = median_p99(lat)
                    print(f"{label}, {part}, {kind}s: n={len(lat)} p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms,"
                          f" max {max(lat) * 1000:.1f} ms")
        worst = max(range(len(samples)), key=lambda i: samples[i][1])
        print(f"{label}: the slowest request is number {worst} ({samples[worst][2]},"
              f" {samples[worst][1] * 1000:.0f} ms)")
        if snaps:
            print(f"{label}: {len(snaps)} snapshots of {big.stat().st_size / 2**20:.0f} MiB, each written in"
                  f" {min(d for _, d in snaps):.2f}-{max(d for _, d in snaps):.2f} s")
    out["cost"] = figures


def _ca(db: Path, tmp: Path) -> Path:
    ca = tmp / "cost-ca.pem"
    ca.write_text(testing.ca_bundle(db))
    return ca


def rows_of(out: dict) -> list[dict]:
    rows = []
    if "rpo" in out:
        oldest = max(o for _, _, o in out["rpo"])
        lost = [n for _, n, _ in out["rpo"]]
        rows.append(row("litestream recovery point: writes lost at 50/s, sync 1 s (oldest lost)",
                        f"{min(lost)}-{max(lost)} ({oldest:.2f} s)", goal="nothing older than 2 s", met=oldest <= 2.0))
    for label, size, restored, answering in out.get("rto", []):
        rows.append(row(f"recovery time: restore -> API answering, {label} ({size:.0f} MiB)",
                        f"{answering:.2f} s (restore {restored:.2f} s)"))
    if "rto_router" in out:
        answering, online = out["rto_router"]
        rows.append(row("recovery time: restore -> real v2.0.3 router online", f"{online:.2f} s"))
    if "cost" in out:
        base = [s[1] for s in out["cost"]["no snapshots"]["all"] if s[2] == "write"]
        during = [s[1] for s in out["cost"]["--snapshot-every 5s"]["during"] if s[2] == "write"]
        if base and during:
            b, d = median_p99(base)[1], median_p99(during)[1]
            rows.append(row("write p99 while a timed snapshot of 200k identities runs", f"{d * 1000:.1f} ms",
                            f"{b * 1000:.1f} ms without snapshots", d / b if b else None))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="rpo,rto,cost")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--identities", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--json", default=None, help="write the figures as rows of make bench's table")
    a = ap.parse_args()
    parts = set(a.only.split(","))
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="ziti-lite-backup-bench-") as d:
        tmp = Path(d)
        big = seeded(a.identities) if parts & {"rto", "cost"} else None
        if "rpo" in parts:
            rpo(tmp, a.rounds, out)
        if "rto" in parts:
            rto(tmp, big, out)
        if "cost" in parts and big is not None:
            cost(tmp, big, a.seconds, out)
    rows = rows_of(out)
    for r in rows:
        print(f"| {r['name']} | {r['value']} | {r['baseline']} |")
    write_rows(a.json, "backups", rows)


if __name__ == "__main__":
    main()
