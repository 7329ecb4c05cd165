"""``make bench`` (the router data model): what streaming the model to v2.0 routers costs.

One ``ziti-lite serve`` on a database seeded with ``--identities`` identities (``seed.py``, 10,000
by default; ``make bench`` runs 10,000 and 100,000), 1,000 services and 20 service policies by
role attribute (through the API), and routers that speak the v2.0 control channel (the tests'
pure-Python router: grouped hello, ``SubscribeToDataModelRequest``). Measured, in one run:

1. the router's cost on the API: 8 s of point reads (one identity's detail, 16 keep-alive
   connections, from a process of their own) while a writer creates an identity every 50 ms,
   without a router and then with one subscribed router: reads/s, identities the writer made,
   the server's RSS (and what one router's subscription added);
2. the full state: time from a router's subscription to the whole ``DataState`` read and its
   bytes (the first router alone; then nine more subscribing at once, while a probe measures a
   point read's latency, against the same probe before); the baseline is the same entities read
   through the management API (identities and services, pages of 500);
3. one change reaching ten routers: an identity created (joining a Dial policy by its role
   attribute) until the change set that carries it has reached every router; the baseline is
   the create request's own latency; and the RSS with ten routers subscribed.

``--server-tree DIR`` runs the server from another source tree (e.g. an export of an earlier
commit), for figures before and after a change in the same run. Loopback only, stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import seed as seeding  # noqa: E402
from common import free_port, median_p99, row, stop_server, wait_ready, write_rows  # noqa: E402

MGMT, CLIENT = "/edge/management/v1", "/edge/client/v1"
CACHE = HERE / ".cache"
LOAD_SECONDS, LOAD_CONNS, WRITE_EVERY, WRITER_SECONDS = 8.0, 16, 0.05, 4.0


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    """The server's CPU time so far (user + system), which moves far less than the wall clock
    with the machine's other load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seeded(count: int) -> Path:
    """A seeded database of ``count`` identities, kept in ``benchmarks/.cache`` between runs."""
    CACHE.mkdir(exist_ok=True)
    db = CACHE / f"rdm-{count}.db"
    if not db.exists():
        tmp = str(db) + ".new"
        for suffix in ("", "-wal", "-shm"):
            Path(tmp + suffix).unlink(missing_ok=True)
        seeding.seed(tmp, count)
        os.replace(tmp, db)
    return db


def start(db: str, port: int, ctrl_port: int, log, tree: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.Popen([sys.executable, "-m", "ziti_lite", "serve", "--db", db, "--port", str(port),
                             "--host", "127.0.0.1", "--ctrl-port", str(ctrl_port), "--edge-port", "0",
                             "--log-level", "warning"],
                            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


# ---------------------------------------------------------------------- load (a process of its own)
async def _reads(port: int, token: str, path: str, conns: int, seconds: float) -> dict:
    from login_bench import Conn, request, tls_context
    req = request("GET", path, headers={"zt-session": token})
    ctx = tls_context()
    lat: list[float] = []
    ok = [0]
    end = time.monotonic() + seconds

    async def one() -> None:
        c = await Conn.open(port, ctx)
        while time.monotonic() < end:
            t = time.perf_counter()
            status, _ = await c.call(req)
            lat.append(time.perf_counter() - t)
            ok[0] += status == 200
        c.close()
    t0 = time.monotonic()
    await asyncio.gather(*(one() for _ in range(conns)))
    p50, p99 = median_p99(lat) if lat else (0.0, 0.0)
    return {"rps": ok[0] / (time.monotonic() - t0), "n": len(lat), "p50": p50, "p99": p99}


def reads(port: int, token: str, path: str, conns: int, seconds: float) -> subprocess.Popen:
    """Point reads from another process (so that the bench's own threads do not slow them)."""
    return subprocess.Popen([sys.executable, __file__, "--load", json.dumps([port, token, path, conns, seconds])],
                            stdout=subprocess.PIPE, text=True)


def write_loop(http, seconds: float, prefix: str) -> int:
    """Create an identity every ``WRITE_EVERY`` s (sequentially, never two at once) for ``seconds``."""
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        r = http.post(f"{MGMT}/identities", json={"name": f"{prefix}-{n}", "type": "Device", "isAdmin": False,
                                                  "roleAttributes": [seeding.ATTRS[n % 20]]})
        assert r.status_code == 201, r.text
        n += 1
        time.sleep(max(0.0, t0 + n * WRITE_EVERY - time.monotonic()))
    return n


def api_cost(http, port: int, token: str, path: str, pid: int, prefix: str) -> dict:
    """The server's CPU per second with the writer alone (``WRITER_SECONDS``), then point reads
    and the writer's pace over the same ``LOAD_SECONDS``; the RSS after."""
    cpu0, t0 = cpu_s(pid), time.monotonic()
    write_loop(http, WRITER_SECONDS, prefix + "-w")
    writer_cpu = (cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    cpu0 = cpu_s(pid)
    proc = reads(port, token, path, LOAD_CONNS, LOAD_SECONDS)
    time.sleep(0.3)     # the reader's start-up (TLS connections) outside the writer's seconds
    writes = write_loop(http, LOAD_SECONDS - 0.3, prefix)
    out = json.loads(proc.communicate()[0])
    out["writes"] = writes
    out["per_cpu"] = out["n"] / max(0.01, cpu_s(pid) - cpu0)
    out["writer_cpu"] = writer_cpu
    out["rss"] = rss_mb(pid)
    return out


# ---------------------------------------------------------------------- the routers
class RealOne:
    """A real ``ziti router`` (``--real-router BINARY``, v2.0.3) as the one router of the rounds:
    enrolled once, started for each round's second half (it subscribes to the data model), stopped
    after it."""

    class _Admin:
        def __init__(self, http) -> None:
            self.http = http

        def create(self, collection: str, body: dict) -> str:
            r = self.http.post(f"{MGMT}/{collection}", json=body)
            assert r.status_code == 201, r.text
            return r.json()["data"]["id"]

        def get(self, path: str):
            return self.http.get(MGMT + path)

    def __init__(self, binary: str, http, ctrl_port: int, pid: int) -> None:
        from tests.interop.real_router import RealRouter
        self.admin, self.pid = self._Admin(http), pid
        self.router = RealRouter(binary, Path(tempfile.mkdtemp(prefix="rdm-real-")), "rdm-real", ctrl_port,
                                 self.admin)
        self.router.enroll()

    def up(self) -> float:
        """Started, online, and the server quiet again (its data model sent): seconds from the
        start until online."""
        import httpx
        t0 = time.monotonic()
        self.router.start()
        while time.monotonic() - t0 < 120:
            try:
                if self.admin.get(f"/edge-routers/{self.router.id}").json()["data"]["isOnline"]:
                    break
            except httpx.TransportError:     # a server busy past the request deadline
                pass
            time.sleep(0.1)
        online = time.monotonic() - t0
        last = cpu_s(self.pid)
        while time.monotonic() - t0 < 120:
            time.sleep(1)
            now = cpu_s(self.pid)
            if now - last < 0.1:
                break
            last = now
        return online

    def down(self) -> None:
        self.router.stop()


def enroll(http, n: int, bundle: str) -> list[tuple]:
    from tests.ctrl.conftest import new_key
    from tests.enroll.conftest import csr
    out = []
    for i in range(n):
        r = http.post(f"{MGMT}/edge-routers", json={"name": f"rdm-router-{i}", "roleAttributes": ["public"]})
        rid = r.json()["data"]["id"]
        ott = http.get(f"{MGMT}/edge-routers/{rid}").json()["data"]["enrollmentToken"]
        key = new_key()
        r = http.post(f"{CLIENT}/enroll/erott?token={ott}", json={"certCsr": csr(key, rid),
                                                                  "serverCertCsr": csr(new_key(), rid)})
        assert r.status_code == 200, r.text
        out.append((rid, r.json()["data"]["cert"], key))
    return out


def subscribe(ctrl_port: int, bundle: str, enrolled: tuple, i: int, out: list) -> None:
    from tests.ctrl.fake_router import FakeRouter
    rid, cert, key = enrolled
    fr = FakeRouter.connect(ctrl_port, cert, key, bundle)
    fr.hello_v2(rid)
    t0 = time.monotonic()
    fr.subscribe(f"bench-{i}")
    state = fr.expect(20500, timeout=120)
    fr.client_hello("127.0.0.1", 4000 + i)
    out.append((fr, state.received - t0, len(state.body)))


def drain(routers) -> None:
    """Drop what the routers received so far (a bench keeps no change sets it does not look at)."""
    for fr in routers:
        fr.kept.clear()
        while not fr.inbox.empty():
            fr.inbox.get_nowait()


def probe(port: int, token: str, path: str, seconds: float) -> subprocess.Popen:
    return reads(port, token, path, 1, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description="the router data model: its cost on the API, full state, changes")
    ap.add_argument("--identities", type=int, default=10_000)
    ap.add_argument("--services", type=int, default=1_000)
    ap.add_argument("--routers", type=int, default=10)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the load without and with a router")
    ap.add_argument("--real-router", help="a ziti binary (v2.0.3): the rounds' one router is a real router")
    ap.add_argument("--server-tree", type=Path, default=ROOT, help="run the server from this source tree")
    ap.add_argument("--json", help="write the figures as rows of make bench's table")
    ap.add_argument("--load", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.load:
        print(json.dumps(asyncio.run(_reads(*json.loads(a.load)))))
        return
    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-rdm-bench-"))
    db = str(tmp / "rdm.db")
    shutil.copy(seeded(a.identities), db)
    port, ctrl_port = free_port(), free_port()
    log = open(tmp / "ziti-lite.log", "wb")  # noqa: SIM115 - open while the server runs
    server = start(db, port, ctrl_port, log, a.server_tree.resolve())
    routers: list = []
    try:
        url = f"https://127.0.0.1:{port}"
        wait_ready(url, server)
        http = httpx.Client(base_url=url, verify=False, timeout=120)
        token = http.post(f"{MGMT}/authenticate?method=password", json={
            "username": seeding.ADMIN_USER, "password": seeding.ADMIN_PASSWORD}).json()["data"]["token"]
        http.headers["zt-session"] = token
        figures = run(a, http, token, port, ctrl_port, server.pid, url, routers)
        report(a, figures)
    finally:
        for fr in routers:
            fr.close()
        stop_server(server)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def rounds(a, f: dict, http, token: str, port: int, ctrl_port: int, pid: int, path: str, bundle: str,
           enrolled: list, routers: list) -> None:
    """The API's cost: the same load without a router and with one, ``a.rounds`` times; then the
    tests' router subscribed for what follows."""
    # rounds of the same load without a router and with one subscribed (closed again before the
    # next round's first half: the machine's other load moves between rounds, not within one)
    bare, one = [], []
    real = RealOne(a.real_router, http, ctrl_port, pid) if a.real_router else None
    try:
        for r in range(a.rounds):
            bare.append(api_cost(http, port, token, path, pid, f"bench-bare-{r}"))
            out: list = []
            pr = probe(port, token, path, 5.0) if r == 0 else None    # a point read's latency meanwhile
            if pr is not None:
                time.sleep(0.3)
            if real is not None:
                online = real.up()
                if r == 0:
                    f["real_online_s"] = online
            else:
                subscribe(ctrl_port, bundle, enrolled[0], 0, out)
            if pr is not None:
                f["full1"] = out[0][1:] if out else (0.0, 0)
                f["probe_first"] = json.loads(pr.communicate()[0])
            time.sleep(1)
            rcpu = (cpu_s(real.router.proc.pid), time.monotonic()) if real is not None and real.router.proc else None
            one.append(api_cost(http, port, token, path, pid, f"bench-one-{r}"))
            if rcpu is not None and real is not None and real.router.proc:
                one[-1]["router_cpu"] = (cpu_s(real.router.proc.pid) - rcpu[0]) / (time.monotonic() - rcpu[1])
            if real is not None:
                real.down()
            elif r < a.rounds - 1:
                out[0][0].close()
            else:
                routers.append(out[0][0])
            time.sleep(1)
    finally:
        if real is not None:
            real.down()
    if real is not None:        # the rest with the tests' router
        out = []
        subscribe(ctrl_port, bundle, enrolled[0], 0, out)
        f["full1"] = out[0][1:]
        routers.append(out[0][0])
    f["bare"], f["one"] = _sum(bare, 0), _sum(one, -1)   # RSS: before any router, with one
    f["rounds"] = [(o["rps"] / b["rps"], o["writes"] / max(1, b["writes"]), o["per_cpu"] / b["per_cpu"],
                    o.get("router_cpu", 0.0)) for b, o in zip(bare, one)]
    drain(routers)



def run(a, http, token: str, port: int, ctrl_port: int, pid: int, url: str, routers: list) -> dict:
    def create(collection: str, body: dict) -> str:
        r = http.post(f"{MGMT}/{collection}", json=body)
        assert r.status_code == 201, r.text
        return r.json()["data"]["id"]
    for i in range(a.services):
        create("services", {"name": f"svc-{i:05d}", "roleAttributes": [f"team-{i % 20}"], "encryptionRequired": True})
    for i in range(20):
        create("service-policies", {"name": f"dial-{i}", "type": "Dial" if i % 2 else "Bind", "semantic": "AnyOf",
                                    "identityRoles": [f"#{seeding.ATTRS[i]}"], "serviceRoles": [f"#team-{i}"]})
    one = http.get(f"{MGMT}/identities?limit=1&offset={a.identities // 2}").json()["data"][0]["id"]
    path = f"{MGMT}/identities/{one}"
    bundle = _ca_bundle(url)
    enrolled = enroll(http, a.routers, bundle)
    f: dict = {}
    time.sleep(1)
    f["rss_idle"] = rss_mb(pid)
    rounds(a, f, http, token, port, ctrl_port, pid, path, bundle, enrolled, routers)

    # nine more at once, a probe of point reads before and while they subscribe
    f["probe_idle"] = json.loads(probe(port, token, path, 3.0).communicate()[0])
    pr = probe(port, token, path, 3.0)
    time.sleep(0.2)
    out = []
    threads = [threading.Thread(target=subscribe, args=(ctrl_port, bundle, enrolled[i], i, out))
               for i in range(1, a.routers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    f["ten_connect_s"] = time.monotonic() - t0
    f["probe_busy"] = json.loads(pr.communicate()[0])
    routers += [fr for fr, _, _ in out]
    f["full_many"] = [s for _, s, _ in out]
    f["rss_ten"] = rss_mb(pid)

    # one change reaching every router
    drain(routers)
    f["delays"], f["posts"] = changes(a, routers, create)
    f["rss_end"] = rss_mb(pid)

    # last (it fills the API's page cache): the same entities read through the API
    t0 = time.monotonic()
    for collection in ("identities", "services"):
        offset = 0
        while True:
            page = http.get(f"{MGMT}/{collection}?limit=500&offset={offset}").json()
            offset += 500
            if offset >= page["meta"]["pagination"]["totalCount"]:
                break
    f["api_read_s"] = time.monotonic() - t0
    return f


def _sum(runs: list[dict], rss_of: int) -> dict:
    """Rounds of one load as one: rates over all of them, latencies of the worst, RSS of one."""
    n = sum(r["n"] for r in runs)
    return {"rps": sum(r["rps"] for r in runs) / len(runs), "n": n, "writes": sum(r["writes"] for r in runs),
            "per_cpu": n / sum(r["n"] / r["per_cpu"] for r in runs), "p50": max(r["p50"] for r in runs),
            "p99": max(r["p99"] for r in runs), "rss": runs[rss_of]["rss"],
            "writer_cpu": sum(r["writer_cpu"] for r in runs) / len(runs)}


def changes(a, routers: list, create) -> tuple[list[float], list[float]]:
    """An identity created (joining a policy by its attribute) until all routers have it."""
    delays, posts = [], []
    for i in range(a.changes):
        t0 = time.monotonic()
        new = create("identities", {"name": f"rdm-change-{i}", "type": "Device", "isAdmin": False,
                                    "roleAttributes": [seeding.ATTRS[1]]})
        posts.append(time.monotonic() - t0)
        arrivals = [fr.expect(20501, timeout=10, where=lambda m, new=new: new.encode() in m.body).received
                    for fr in routers]
        delays.append(max(arrivals) - t0)
        drain(routers)
        time.sleep(0.05)
    return delays, posts


def report(a, f: dict) -> None:
    bare, one = f["bare"], f["one"]
    full_s, full_b = f["full1"]
    many = statistics.median(f["full_many"]) if f["full_many"] else 0.0
    d50, d99 = median_p99(f["delays"])
    p50, _ = median_p99(f["posts"])
    rr, wr = one["rps"] / bare["rps"], one["writes"] / max(1, bare["writes"])
    grow1, grow10 = one["rss"] - bare["rss"], f["rss_end"] - bare["rss"]
    k = f"{a.identities // 1000}k"
    print(f"router data model: {a.identities} identities, {a.services} services, 20 policies; {a.routers} v2 routers"
          f" (the tests' pure-Python router); {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f};"
          f" server from {a.server_tree}\n")
    print("| measured | ziti-lite | baseline (same run) | ratio |\n|---|---|---|---|")
    which = "real v2.0.3 router" if a.real_router else "router"
    print(f"| point reads/s, 16 connections, writer every 50 ms | {one['rps']:.0f} with 1 {which} |"
          f" {bare['rps']:.0f} without | {rr:.2f} |")
    print("| the same, each round (reads, writes, reads per server CPU s; the router process's CPU/s) |"
          f" {', '.join(f'{x:.2f} {y:.2f} {z:.2f}; {c:.2f}' for x, y, z, c in f['rounds'])} | | |")
    print(f"| point reads per server CPU second (same load) | {one['per_cpu']:.0f} | {bare['per_cpu']:.0f} |"
          f" {one['per_cpu'] / bare['per_cpu']:.2f} |")
    print(f"| server CPU per second, the writer alone (20 identities/s) | {one['writer_cpu']:.3f} |"
          f" {bare['writer_cpu']:.3f} | {one['writer_cpu'] / max(bare['writer_cpu'], 1e-9):.2f} |")
    print(f"| point read p50 / p99 under that load | {one['p50'] * 1000:.1f} / {one['p99'] * 1000:.1f} ms |"
          f" {bare['p50'] * 1000:.1f} / {bare['p99'] * 1000:.1f} ms | {one['p99'] / max(bare['p99'], 1e-9):.2f} |")
    print(f"| identities the writer created in {a.rounds} x {LOAD_SECONDS:.0f} s | {one['writes']} | {bare['writes']} | {wr:.2f} |")
    print(f"| server RSS after the load | {one['rss']:.0f} MB (+{grow1:.0f}) | {bare['rss']:.0f} MB"
          f" (idle before: {f['rss_idle']:.0f}) | |")
    print(f"| RSS once {a.routers} routers subscribed | {f['rss_ten']:.0f} MB (+{f['rss_ten'] - bare['rss']:.0f}) |"
          f" {bare['rss']:.0f} MB | |")
    print(f"| RSS with {a.routers} routers, after {a.changes} changes | {f['rss_end']:.0f} MB (+{grow10:.0f}) |"
          f" {bare['rss']:.0f} MB | |")
    print(f"| full state, first router: subscription to DataState read | {full_s * 1000:.0f} ms, {full_b / 1e6:.2f} MB"
          f" | API read of the same entities (pages of 500): {f['api_read_s'] * 1000:.0f} ms |"
          f" {full_s / f['api_read_s']:.2f} |")
    print(f"| full state, {a.routers - 1} routers at once (median; all done in) | {many * 1000:.0f} ms;"
          f" {f['ten_connect_s'] * 1000:.0f} ms | | |")
    pi, pb = f["probe_idle"], f["probe_busy"]
    if "real_online_s" in f:
        print(f"| the real router: started to online (its model then read and sent) | {f['real_online_s']:.1f} s"
              " | | |")
    pf = f["probe_first"]
    print(f"| point read p50 / p99 (1 connection) while the first router's model is read and sent |"
          f" {pf['p50'] * 1000:.1f} / {pf['p99'] * 1000:.1f} ms | {pi['p50'] * 1000:.1f} / {pi['p99'] * 1000:.1f} ms"
          f" idle | {pf['p99'] / max(pi['p99'], 1e-9):.2f} |")
    print(f"| point read p50 / p99 (1 connection) while they subscribe | {pb['p50'] * 1000:.1f} /"
          f" {pb['p99'] * 1000:.1f} ms | {pi['p50'] * 1000:.1f} / {pi['p99'] * 1000:.1f} ms idle |"
          f" {pb['p99'] / max(pi['p99'], 1e-9):.2f} |")
    print(f"| one change reaching all {a.routers} routers, p50 / p99 of {a.changes} | {d50 * 1000:.0f} ms /"
          f" {d99 * 1000:.0f} ms | the create request itself, p50: {p50 * 1000:.1f} ms | {d50 / p50:.1f} |")
    write_rows(a.json, f"router data model ({k} identities)", [
        row(f"RDM point reads with a router ({k})", f"{one['rps']:.0f}/s", f"{bare['rps']:.0f}/s without", rr,
            ">= 0.9", rr >= 0.9),
        row(f"RDM writer's pace with a router ({k})", f"{one['writes']}", f"{bare['writes']} without", wr,
            ">= 0.9", wr >= 0.9),
        row(f"RDM server CPU at 20 writes/s with a router ({k})", f"{one['writer_cpu']:.3f}/s",
            f"{bare['writer_cpu']:.3f}/s without", one["writer_cpu"] / max(bare["writer_cpu"], 1e-9)),
        row(f"RDM reads per server CPU s with a router ({k})", f"{one['per_cpu']:.0f}",
            f"{bare['per_cpu']:.0f} without", one["per_cpu"] / bare["per_cpu"]),
        row(f"RDM RSS added by {a.routers} routers ({k})", f"+{grow10:.0f} MB", f"{bare['rss']:.0f} MB", None,
            "<= 60 MB", grow10 <= 60),
        row(f"RDM full state ({k})", f"{full_s * 1000:.0f} ms, {full_b / 1e6:.2f} MB",
            f"API read {f['api_read_s'] * 1000:.0f} ms", full_s / f["api_read_s"]),
        row(f"RDM change to {a.routers} routers p50/p99 ({k})", f"{d50 * 1000:.0f}/{d99 * 1000:.0f} ms",
            f"create {p50 * 1000:.1f} ms", d50 / p50, "< 1 s", d99 < 1.0)])


def _ca_bundle(url: str) -> str:
    """The controller's CA bundle (``/.well-known/est/cacerts``, PKCS#7) as PEM text."""
    import base64
    import ssl
    import urllib.request

    from cryptography.hazmat.primitives.serialization import Encoding, pkcs7
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(url + "/.well-known/est/cacerts", context=ctx, timeout=10) as r:
        der = base64.b64decode(r.read())
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in pkcs7.load_der_pkcs7_certificates(der))


if __name__ == "__main__":
    main()
