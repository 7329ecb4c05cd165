"""``make bench``: ziti-lite against a bare Starlette + apsw baseline, side by side, in one run.

1. seed a fresh controller DB with 100,000 identities (``seed.py``);
2. start ``ziti-lite serve`` (TLS, 1 worker) and the baseline (``baseline.py``: uvicorn, TLS with
   the same certificate, 1 worker) on free 127.0.0.1 ports, reading the same file;
3. load them alternately A B A B for ``--rounds`` rounds at ``-c`` connections with ``wrk``
   (or a Python asyncio + httpx keep-alive generator when wrk is missing);
4. print req/s, p50 and p99 of each side (median over the rounds) and the A/B throughput ratio.

Loopback only, bounded in time (a few minutes with the defaults), stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import seed as seeding  # noqa: E402
from common import free_port, row, stop_server, write_rows  # noqa: E402

MGMT = "/edge/management/v1"
HARD_LIMIT_S = 330  # the whole run, whatever happens


@dataclass
class Case:
    name: str
    a_path: str           # ziti-lite
    b_path: str           # baseline
    goal: float
    a_session: bool = True


@dataclass
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    requests: int = 0
    cpu_us: float = float("nan")   # server CPU time per request (user + system)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def measured(load, proc: subprocess.Popen, *args) -> Result:
    """One load run, with the CPU time the server process spent per request."""
    c0 = cpu_seconds(proc.pid)
    r = load(*args)
    c1 = cpu_seconds(proc.pid)
    if r.requests:
        r.cpu_us = (c1 - c0) / r.requests * 1e6
    return r


# in a path, replaced by a new value for every request (wrk: a Lua script; pyload: a counter):
# ziti-lite remembers a parsed filter and a count until the database changes, so a search sent
# again and again measures those caches; one with a new term each time measures the search
NONCE = "NONCE"
_WRK_NONCE = """local n = 0
request = function()
  n = n + 1
  local path = string.gsub(wrk.path, "NONCE", tostring(n) .. "-" .. tostring(math.random(1000000000)))
  return wrk.format(nil, path)
end
"""


def cases(sample_id: str, needle: str) -> list[Case]:
    flt = quote(f'name contains "{needle}"')
    fresh = quote(f'name contains "{needle}" and name != "{NONCE}"')
    return [
        Case("GET /identities/{id}", f"{MGMT}/identities/{sample_id}", f"{MGMT}/identities/{sample_id}", 0.75),
        Case(f'GET /identities?filter=name contains "{needle}" (the same search again)',
             f"{MGMT}/identities?filter={flt}", f"{MGMT}/identities?contains={quote(needle)}&limit=10", 0.60),
        Case(f'GET /identities?filter=name contains "{needle}" (a new search each time)',
             f"{MGMT}/identities?filter={fresh}", f"{MGMT}/identities?contains={quote(needle)}&nonce={NONCE}&limit=10",
             0.60),
        Case("GET /identities?limit=10", f"{MGMT}/identities?limit=10", f"{MGMT}/identities?limit=10", 0.60),
        Case("GET /version (client API)", "/edge/client/v1/version", "/static", 0.85, a_session=False),
    ]


# ------------------------------------------------------------------ processes
def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url, verify=False, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} not ready after {timeout:.0f} s")


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    f = open(log, "wb")
    return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)


# ------------------------------------------------------------------ load generators
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text.strip())
    return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")


def wrk(url: str, headers: dict, conns: int, threads: int, seconds: float) -> Result:
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds:g}s", "--latency", "--timeout", "5s"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        if NONCE in url:
            script.write(_WRK_NONCE)
            script.flush()
            cmd += ["-s", script.name]
        out = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=seconds + 30).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    errors = 0
    for pat in (r"Non-2xx or 3xx responses:\s+(\d+)", r"Socket errors:.*?timeout (\d+)"):
        m = re.search(pat, out)
        errors += int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    return Result(rps, p50, p99, errors, total)


def pyload(url: str, headers: dict, conns: int, threads: int, seconds: float) -> Result:
    """Fallback: ``conns`` keep-alive connections, each a loop of sequential requests."""
    async def run() -> Result:
        lat: list[float] = []
        errors = 0
        limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)
        async with httpx.AsyncClient(verify=False, limits=limits, headers=headers, timeout=5.0) as client:
            async def worker(until: float) -> None:
                nonlocal errors
                while (t0 := time.perf_counter()) < until:
                    try:
                        r = await client.get(url.replace(NONCE, f"{len(lat)}-{random.randrange(10**9)}"))
                        if r.status_code >= 300:
                            errors += 1
                    except httpx.HTTPError:
                        errors += 1
                    lat.append((time.perf_counter() - t0) * 1e3)
            await asyncio.gather(*(client.get(url.replace(NONCE, "0")) for _ in range(conns)),
                                 return_exceptions=True)  # connect
            start_t = time.perf_counter()
            await asyncio.gather(*(worker(start_t + seconds) for _ in range(conns)))
            took = time.perf_counter() - start_t
        lat.sort()
        q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")  # noqa: E731
        return Result(len(lat) / took, q(0.50), q(0.99), errors, len(lat))
    return asyncio.run(run())


# ------------------------------------------------------------------ the run
def main() -> None:
    ap = argparse.ArgumentParser(description="ziti-lite vs bare Starlette + apsw, side by side")
    ap.add_argument("--count", type=int, default=100_000, help="identities to seed")
    ap.add_argument("--db", help="use this already seeded DB (from seed.py) instead of a fresh one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="per round and side")
    ap.add_argument("-c", "--connections", type=int, default=32)
    ap.add_argument("-t", "--threads", type=int, default=2, help="wrk threads")
    ap.add_argument("--needle", default="x", help='the "name contains" needle')
    ap.add_argument("--only", help="run only cases whose name contains this text")
    ap.add_argument("--python-load", action="store_true", help="use the Python load generator even if wrk exists")
    ap.add_argument("--json", help="also write the figures as rows of make bench's table (table.py)")
    ap.add_argument("--loops", default=default_loop(),
                    help="event loops, comma-separated (uvloop,asyncio): a pair A/B per loop, all interleaved")
    a = ap.parse_args()
    loops = [x.strip() for x in a.loops.split(",") if x.strip()]
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(SystemExit("bench: hard time limit reached")))
    signal.alarm(HARD_LIMIT_S * len(loops))

    load = wrk if shutil.which("wrk") and not a.python_load else pyload
    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-bench-"))
    procs: list[subprocess.Popen] = []
    try:
        if a.db:
            db = a.db
            import apsw
            c = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
            sample = c.execute("SELECT id FROM identities WHERE is_default_admin = 0 ORDER BY id LIMIT 1 OFFSET"
                               " (SELECT count(*) / 2 FROM identities)").fetchone()[0]
            n = c.execute("SELECT count(*) FROM identities").fetchone()[0]
            c.close()
            print(f"using {db}: {n} identities")
        else:
            db = str(tmp / "bench.db")
            t0 = time.perf_counter()
            s = seeding.seed(db, a.count)
            sample = s["sample_id"]
            print(f"seeded {s['identities']} identities in {time.perf_counter() - t0:.1f} s ({db})")

        pairs: dict[str, tuple[subprocess.Popen, str, subprocess.Popen, str]] = {}
        for i, lp in enumerate(loops):   # A and B on the same loop, a copy of the file per pair
            pa, pb = free_port(), free_port()
            if i:   # one serving process per database file (serve's lock)
                shutil.copy(db, tmp / f"bench-{lp}.db")
            pair_db = db if not i else str(tmp / f"bench-{lp}.db")
            ziti = start([sys.executable, "-m", "ziti_lite", "serve", "--db", pair_db, "--host", "127.0.0.1", "--port",
                          str(pa), "--admin-password", seeding.ADMIN_PASSWORD, "--log-level", "warning", "--loop", lp,
                          "--edge-port", str(free_port()), "--ctrl-port", "0"],
                         tmp / f"ziti-lite-{lp}.log")
            procs.append(ziti)
            base = start([sys.executable, str(HERE / "baseline.py"), "--db", pair_db, "--port", str(pb), "--loop", lp],
                         tmp / f"baseline-{lp}.log")
            procs.append(base)
            pairs[lp] = (ziti, f"https://127.0.0.1:{pa}", base, f"https://127.0.0.1:{pb}")
        for ziti, a_url, base, b_url in pairs.values():
            wait_ready(a_url + "/version", ziti)
            wait_ready(b_url + "/static", base)
        tokens: dict[str, str] = {}     # each A serves its own file: its own admin session
        for lp, (_, a_url, _, _) in pairs.items():
            r = httpx.post(f"{a_url}{MGMT}/authenticate?method=password", verify=False,
                           json={"username": seeding.ADMIN_USER, "password": seeding.ADMIN_PASSWORD})
            r.raise_for_status()
            tokens[lp] = r.json()["data"]["token"]
        token = next(iter(tokens.values()))

        todo = [c for c in cases(sample, a.needle) if not a.only or a.only in c.name]
        for c in todo:  # correctness first: both answer 200, the lists agree on the count
            _, a_url, _, b_url = next(iter(pairs.values()))
            ra = httpx.get(a_url + c.a_path.replace(NONCE, "0"), verify=False,
                           headers={"zt-session": token} if c.a_session else {})
            rb = httpx.get(b_url + c.b_path.replace(NONCE, "0"), verify=False)
            assert ra.status_code == 200 and rb.status_code == 200, (c.name, ra.status_code, ra.text[:300], rb.status_code)
            pa_ = ra.json()["meta"].get("pagination")
            if pa_:
                assert pa_["totalCount"] == rb.json()["meta"]["pagination"]["totalCount"], c.name
                print(f"  {c.name}: totalCount {pa_['totalCount']}, {len(ra.json()['data'])} rows,"
                      f" {len(ra.content)} vs {len(rb.content)} bytes")
            else:
                print(f"  {c.name}: {len(ra.content)} vs {len(rb.content)} bytes")

        gen = "wrk" if load is wrk else "python asyncio+httpx"
        load_before = os.getloadavg()
        print(f"\nload: {gen}, c={a.connections}, {a.rounds} rounds x {a.seconds:g} s per side, alternating"
              f" {' '.join(f'A-{lp} B-{lp}' for lp in loops)}; A = ziti-lite, B = baseline, both 1 worker, TLS,"
              f" loopback; load average {' '.join(f'{x:.2f}' for x in load_before)}\n")
        summary: dict[str, list] = {lp: [] for lp in loops}
        for c in todo:
            hs = {lp: {"zt-session": tokens[lp]} if c.a_session else {} for lp in loops}
            got: dict[str, tuple[list, list]] = {lp: ([], []) for lp in loops}
            for lp, (ziti, a_url, base, b_url) in pairs.items():   # warm up every side
                load(a_url + c.a_path, hs[lp], a.connections, a.threads, 1.0)
                load(b_url + c.b_path, {}, a.connections, a.threads, 1.0)
            for i in range(a.rounds):
                for lp, (ziti, a_url, base, b_url) in pairs.items():
                    ha = hs[lp]
                    ra_list, rb_list = got[lp]
                    ra_list.append(measured(load, ziti, a_url + c.a_path, ha, a.connections, a.threads, a.seconds))
                    rb_list.append(measured(load, base, b_url + c.b_path, {}, a.connections, a.threads, a.seconds))
                    ra_, rb_ = ra_list[-1], rb_list[-1]
                    print(f"  {c.name:<42} {lp:<7} round {i + 1}: A {ra_.rps:7.0f} req/s {ra_.cpu_us:5.0f} µs CPU/req"
                          f"  B {rb_.rps:7.0f} req/s {rb_.cpu_us:5.0f} µs CPU/req  ratio {ra_.rps / rb_.rps:.2f}",
                          flush=True)
            for lp in loops:
                summary[lp].append((c, med(got[lp][0]), med(got[lp][1])))

        failed = False
        rows = []
        for lp in loops:
            print(f"\nmedians over the rounds, {lp} loop (both sides):")
            print(f"  {'endpoint':<42} {'A req/s':>8} {'p50':>7} {'p99':>7} {'CPU/req':>7} | {'B req/s':>8} {'p50':>7}"
                  f" {'p99':>7} {'CPU/req':>7} | {'ratio':>5} goal   p99 A/B")
            for c, ra_, rb_ in summary[lp]:
                ratio = ra_.rps / rb_.rps
                ok = ratio >= c.goal
                failed |= not ok
                rows.append(row(f"{c.name} ({lp})", f"{ra_.rps:.0f}/s, {ra_.cpu_us:.0f} µs CPU",
                                f"bare {rb_.rps:.0f}/s, {rb_.cpu_us:.0f} µs CPU", ratio, f"≥ {c.goal:.2f}", ok))
                print(f"  {c.name:<42} {ra_.rps:8.0f} {ra_.p50_ms:6.2f}ms {ra_.p99_ms:5.1f}ms {ra_.cpu_us:5.0f}µs |"
                      f" {rb_.rps:8.0f} {rb_.p50_ms:6.2f}ms {rb_.p99_ms:5.1f}ms {rb_.cpu_us:5.0f}µs | {ratio:5.2f}"
                      f" {'>=' if ok else '< '}{c.goal:.2f}  {ra_.p99_ms / rb_.p99_ms:4.2f}"
                      + (f"  errors A {ra_.errors} B {rb_.errors}" if ra_.errors or rb_.errors else ""))
        if len(loops) > 1:
            first, *others = loops
            for lp in others:
                print(f"\nloop decision: ziti-lite on {first} / on {lp} (req/s; server CPU per request):")
                for (c, ra1, rb1), (_, ra2, rb2) in zip(summary[first], summary[lp]):
                    print(f"  {c.name:<42} A {ra1.rps / ra2.rps:5.2f}x  CPU {ra1.cpu_us / ra2.cpu_us:5.2f}x"
                          f"   |  bare: {rb1.rps / rb2.rps:5.2f}x  CPU {rb1.cpu_us / rb2.cpu_us:5.2f}x")
        print(f"\nload average before / after: {' '.join(f'{x:.2f}' for x in load_before)} /"
              f" {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("\nall goals met" if not failed else "\nsome goals NOT met")
        write_rows(a.json, "ziti-lite vs the bare Starlette + apsw stack (req/s, same loop)", rows)
    finally:
        for p in procs:
            stop_server(p)
        if os.environ.get("BENCH_KEEP") is None:
            shutil.rmtree(tmp, ignore_errors=True)
        signal.alarm(0)


def default_loop() -> str:
    """``serve``'s own choice (--loop auto): uvloop when installed."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def med(results: list[Result]) -> Result:
    return Result(statistics.median(r.rps for r in results), statistics.median(r.p50_ms for r in results),
                  statistics.median(r.p99_ms for r in results), sum(r.errors for r in results),
                  sum(r.requests for r in results), statistics.median(r.cpu_us for r in results))


if __name__ == "__main__":
    main()
