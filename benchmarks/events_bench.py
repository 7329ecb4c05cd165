"""Cost of events and audit: writes (POST /services) and password logins against two live
controllers in the same run, one with neither (``--audit-days 0``, no ``--events``) and one with
both (``--events FILE``, audit on), rounds interleaved; and a write's p99 with the events file a
FIFO nobody reads (a blocked sink) against a regular file. Prints the ratios (goal >= 0.9; p99
blocked/unblocked <= 2); the writes' CPU ratio also as the median of the rounds' ratios, which a
burst of other load on the box moves less than the totals."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ziti_lite import testing  # noqa: E402

PASSWORD = "Bench-Passw0rd"
# a round's server CPU is read from /proc in clock ticks (10 ms): 1,000 writes (~0.9 s of CPU)
# keep that resolution near 1 % of a round; 300 (the earlier count) left ~4 % in every ratio
WRITES = int(os.environ.get("EVENTS_BENCH_WRITES", "1000"))
LOGINS = int(os.environ.get("EVENTS_BENCH_LOGINS", "60"))
ROUNDS = int(os.environ.get("EVENTS_BENCH_ROUNDS", "10"))


def serve(tmp: str, name: str, template: str, extra: tuple[str, ...]) -> testing.Controller:
    db = os.path.join(tmp, f"{name}.db")
    with open(template, "rb") as src, open(db, "wb") as dst:
        dst.write(src.read())
    return testing.start(db, PASSWORD, edge=False, extra=extra)


TICK = os.sysconf("SC_CLK_TCK")


def cpu(ctl: testing.Controller) -> float:
    """CPU seconds the server process has used (user + system): robust where wall-clock rates
    move with the machine's other load."""
    fields = open(f"/proc/{ctl.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def client(ctl: testing.Controller) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=ctl.url, verify=ctl.ca_file, timeout=30)
    r = c.post("/edge/management/v1/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
    return c, r.json()["data"]["token"]


def writes(ctl, tag: str, n: int) -> list[float]:
    c, token = client(ctl)
    out = []
    for i in range(n):
        t = time.perf_counter()
        r = c.post("/edge/management/v1/services", headers={"zt-session": token},
                   json={"name": f"{tag}-{i}", "encryptionRequired": True})
        out.append(time.perf_counter() - t)
        assert r.status_code == 201, r.text
    c.close()
    return out


def logins(ctl, n: int) -> float:
    c, _ = client(ctl)
    t = time.perf_counter()
    for _ in range(n):
        r = c.post("/edge/management/v1/authenticate?method=password", json={"username": "admin", "password": PASSWORD})
        assert r.status_code == 200
    took = time.perf_counter() - t
    c.close()
    return n / took


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100)[98]


def main() -> None:
    print("load average (1, 5, 15 min) at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    tmp = tempfile.mkdtemp(prefix="events-bench-")
    template = os.path.join(tmp, "template.db")
    testing.make_template(template, admin_password=PASSWORD)
    off = serve(tmp, "off", template, ("--audit-days", "0"))
    on = serve(tmp, "on", template, ("--events", os.path.join(tmp, "events.jsonl")))
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    blocked = serve(tmp, "blocked", template, ("--events", fifo))
    try:
        w: dict[str, list[float]] = {"off": [], "on": [], "blocked": []}
        lg: dict[str, list[float]] = {"off": [], "on": []}
        wcpu: dict[str, float] = {"off": 0.0, "on": 0.0, "blocked": 0.0}
        round_cpu: dict[str, list[float]] = {"off": [], "on": [], "blocked": []}   # per round: robust to bursts
        lcpu: dict[str, float] = {"off": 0.0, "on": 0.0}
        for ctl in (off, on, blocked):   # warm-up: first requests pay imports, caches, the password pool
            writes(ctl, "warm", 50)
            logins(ctl, 10)
        for rnd in range(ROUNDS):
            order = (("off", off), ("on", on), ("blocked", blocked))
            for name, ctl in (order if rnd % 2 == 0 else order[::-1]):
                c0 = cpu(ctl)
                xs = writes(ctl, f"r{rnd}", WRITES)
                round_cpu[name].append(cpu(ctl) - c0)
                wcpu[name] += round_cpu[name][-1]
                w[name].append(len(xs) / sum(xs))
                w.setdefault(name + "_lat", []).extend(xs)
            for name, ctl in ((("off", off), ("on", on)) if rnd % 2 == 0 else (("on", on), ("off", off))):
                c0 = cpu(ctl)
                lg[name].append(logins(ctl, LOGINS))
                lcpu[name] += cpu(ctl) - c0
        wo, wn = statistics.median(w["off"]), statistics.median(w["on"])
        lo, ln = statistics.median(lg["off"]), statistics.median(lg["on"])
        print(f"writes/s   off {wo:8.1f}  on {wn:8.1f}  ratio {wn / wo:.2f}   (wall clock)")
        print(f"logins/s   off {lo:8.1f}  on {ln:8.1f}  ratio {ln / lo:.2f}   (wall clock)")
        n_w, n_l = WRITES * ROUNDS, LOGINS * ROUNDS
        print(f"writes per server CPU second  off {n_w / wcpu['off']:8.1f}  on {n_w / wcpu['on']:8.1f}  ratio "
              f"{wcpu['off'] / wcpu['on']:.2f}")
        ratios = [o / n for o, n in zip(round_cpu["off"], round_cpu["on"], strict=True) if n]
        per_round = statistics.median(ratios)
        print("writes per server CPU second  each round's ratio", " ".join(f"{r:.2f}" for r in ratios))
        print("writes/s (wall clock)         each round's ratio",
              " ".join(f"{n / o:.2f}" for o, n in zip(w["off"], w["on"], strict=True)))
        print("logins/s (wall clock)         each round's ratio",
              " ".join(f"{n / o:.2f}" for o, n in zip(lg["off"], lg["on"], strict=True)))
        print(f"writes per server CPU second  median of {ROUNDS} rounds' ratios {per_round:.2f}")
        print(f"logins per server CPU second  off {n_l / lcpu['off']:8.1f}  on {n_l / lcpu['on']:8.1f}  ratio "
              f"{lcpu['off'] / lcpu['on']:.2f}")
        pb, pu = p99(w["blocked_lat"]), p99(w["on_lat"])
        print(f"write p99  blocked sink {pb * 1000:.2f} ms  file sink {pu * 1000:.2f} ms  ratio {pb / pu:.2f}")
        metrics = httpx.get(blocked.url + "/metrics", verify=blocked.ca_file).text
        dropped = [line for line in metrics.splitlines() if line.startswith("ziti_lite_events_dropped_total")]
        print("blocked sink:", "; ".join(dropped))
        print("load average (1, 5, 15 min) at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    finally:
        for ctl in (off, on, blocked):
            ctl.stop()


if __name__ == "__main__":
    main()
