"""``make bench`` (real routers): dial setup and one connection's throughput through a real
OpenZiti router of each line present (``ziti router`` v2.0.3, v1.6.20, v1.3.3 under ziti-lite's
control channel), and through two real routers joined by a link, beside the same figures through
ziti-lite's embedded router, in one run.

One ``ziti-lite serve`` with its embedded router and its control channel; one real router
created, enrolled and run as an operator would (``tests/interop/real_router.py``). The same host
and dialer processes as ``edge_bench.py`` (the pure-Python edge client, an unencrypted service)
connect to **E** = the embedded router, **R** = one real router of a line (host and dialer on
it; one per line), or **L** = two real routers of the newest line present joined by a link (the
dialer enters one, the host binds on the other, every byte crosses the link), alternating per round:

1. dial setup latency (``--dials`` dials one at a time on an open channel: Connect ->
   StateConnected; through the real router that includes its CreateCircuit round trip to the
   controller and the controller's Route round trip back);
2. one connection's bulk throughput (``--bulk`` MiB in ``--chunk`` KiB writes, dialer to host,
   until the host's acknowledgement of the last byte).

The binaries are found as ``make interop`` finds them (each line's variable or the cache); without
any (nor ``$ZITI_BIN`` or ``ziti`` on PATH, taken as one line) it says so and stops. Loopback only, stops by itself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import edge_bench  # noqa: E402
from common import free_port, median_p99, start_server, stop_server, wait_ready  # noqa: E402
from vs_openziti import ziti_binary  # noqa: E402

HARD_LIMIT_S = 600
MiB = 1024 * 1024


class _Admin:
    """The management calls ``RealRouter`` makes, over httpx."""

    def __init__(self, url: str):
        import httpx
        self.http = httpx.Client(base_url=url + edge_bench.MGMT, verify=False, timeout=30)
        r = self.http.post("/authenticate?method=password",
                           json={"username": "admin", "password": edge_bench.ADMIN_PASSWORD})
        r.raise_for_status()
        self.http.headers["zt-session"] = r.json()["data"]["token"]

    def create(self, collection: str, body: dict) -> str:
        r = self.http.post(f"/{collection}", json=body)
        assert r.status_code == 201, r.text
        return r.json()["data"]["id"]

    def get(self, path: str):
        return self.http.get(path)


def _linked(url: str) -> bool:
    """Whether ziti-lite counts a link (its /metrics)."""
    import httpx
    text = httpx.get(url + "/metrics", verify=False, timeout=10).text
    return any(line.startswith("ziti_lite_ctrl_links ") and not line.endswith(" 0") for line in text.splitlines())


def main() -> None:
    ap = argparse.ArgumentParser(description="a real OpenZiti router under ziti-lite vs the embedded router")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per measurement (each side once per round)")
    ap.add_argument("--dials", type=int, default=300, help="dials per round")
    ap.add_argument("--bulk", type=int, default=64, help="MiB through one connection")
    ap.add_argument("--chunk", type=int, default=32, help="KiB per write")
    a = ap.parse_args()
    from tests.interop.conftest import ROUTER_LINES, find_binary
    lines = {v: b for v in ROUTER_LINES if (b := find_binary(v)) is not None}
    if not lines:
        fallback = ziti_binary()
        if fallback is None:
            print("router_bench: no OpenZiti `ziti` binary (the interop tests' variables or cache, $ZITI_BIN or PATH):"
                  " skipped")
            return
        lines = {"ziti": fallback}
    from tests.interop.real_router import RealRouter, wait_online
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(SystemExit("router bench: hard time limit")))
    signal.alarm(HARD_LIMIT_S)
    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-router-bench-"))
    procs = []
    routers: list = []
    try:
        db = tmp / "router.db"
        port, edge_port, ctrl_port = free_port(), free_port(), free_port()
        log = open(tmp / "ziti-lite.log", "wb")  # noqa: SIM115 - open while the server runs
        server = start_server(db, port, log, "--host", "127.0.0.1", "--edge-port", str(edge_port), "--ctrl-port",
                              str(ctrl_port), "--admin-password", edge_bench.ADMIN_PASSWORD)
        procs.append(server)
        url = f"https://127.0.0.1:{port}"
        wait_ready(url, server)
        admin = _Admin(url)
        per_line: dict[str, RealRouter] = {}
        online: dict[str, float] = {}
        for i, (line, binary) in enumerate(lines.items()):
            r = RealRouter(str(binary), tmp, f"bench-router-{i}", ctrl_port, admin)
            routers.append(r)
            r.enroll()
            t0 = time.monotonic()
            r.start()
            wait_online(admin, r.id, timeout=15)
            online[line] = time.monotonic() - t0
            per_line[line] = r
        newest = next(iter(lines))
        router = per_line[newest]
        far = RealRouter(str(lines[newest]), tmp, "bench-far", ctrl_port, admin, private=False)   # listens for links
        routers.append(far)
        far.enroll()
        far.start()
        wait_online(admin, far.id, timeout=15)
        for _ in range(300):   # the link: the newest line's router dials the far one's listener
            if _linked(url):
                break
            time.sleep(0.1)
        else:
            raise SystemExit("router bench: the two routers did not link")
        base = edge_bench.setup(url, tmp)
        time.sleep(0.5)   # the dialer's and host's API sessions reach the real router (sync tick 0.2 s)
        assert far.proc is not None
        runners = {"E": edge_bench.Runner({**base, "edge_port": edge_port}, server.pid, 0)}
        names = {"E": "embedded router"}
        for line, r in per_line.items():
            assert r.proc is not None
            runners[line] = edge_bench.Runner({**base, "edge_port": r.edge_port}, r.proc.pid, 0)
            names[line] = f"real router {line}"
        assert router.proc is not None
        runners["L"] = edge_bench.Runner({**base, "edge_port": router.edge_port, "host_port": far.edge_port},
                                         router.proc.pid, 0)
        names["L"] = f"two real routers {newest}, one link"
        print(f"E = ziti-lite's embedded router (pid {server.pid}); "
              + "; ".join(f"{line} = ziti router {line} (online {s:.2f} s after `ziti router run`)"
                          for line, s in online.items())
              + f"; {os.cpu_count()} CPUs; {a.rounds} rounds alternating; load average {os.getloadavg()[0]:.1f}\n",
              flush=True)

        def run(side: str, test: str, cfg: dict) -> dict:
            # the previous host's terminator goes with its channel: wait, so that no dial tries it
            for _ in range(100):
                terms = admin.get(f'/terminators?filter=service="{base["service"]}"')
                if terms.status_code != 200 or not terms.json()["data"]:
                    break
                time.sleep(0.05)
            return runners[side].run("A", test, cfg)

        def rounds(test: str, cfg: dict, show) -> dict[str, list[dict]]:
            out: dict[str, list[dict]] = {side: [] for side in runners}
            for side in out:   # warm-up, not counted
                run(side, test, cfg)
            for i in range(a.rounds):
                for side in out:
                    out[side].append(run(side, test, cfg))
                print(f"  {test:<6} round {i + 1}: " + "   ".join(f"{k} {show(v[-1])}" for k, v in out.items()),
                      flush=True)
            return out

        def lat(r: dict) -> str:
            p50, p99 = median_p99(r["lat_ms"])
            return f"p50 {p50:5.2f} ms p99 {p99:6.2f} ms"
        dials = rounds("dials", {"test": "dials", "dials": a.dials, "warmup": 20, "pool": 8}, lat)
        bulk = rounds("bulk", {"test": "bulk", "expect": a.bulk * MiB, "chunk": a.chunk * 1024, "pool": 1,
                               "conns": 1}, lambda r: f"{r['mbps']:7.1f} MB/s")
        print("\n| through | dial setup p50 | dial setup p99 | one connection |\n|---|---|---|---|")
        for side, name in names.items():
            pairs = [median_p99(r["lat_ms"]) for r in dials[side]]
            mbps = statistics.median(r["mbps"] for r in bulk[side])
            print(f"| {name} | {statistics.median(p[0] for p in pairs):.2f} ms |"
                  f" {statistics.median(p[1] for p in pairs):.2f} ms | {mbps:.1f} MB/s |")
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)")
    finally:
        for r in routers:
            r.stop()
        for p in procs:
            stop_server(p)
        if os.environ.get("BENCH_KEEP") is None:
            shutil.rmtree(tmp, ignore_errors=True)
        signal.alarm(0)


if __name__ == "__main__":
    main()
