"""Cost of events and audit: writes (POST /services) and password logins against two live
controllers in the same run, one with neither (``--audit-days 0``, no ``--events``) and one with
both (``--events FILE``, audit on), rounds interleaved; and a write's p99 with the events file a
FIFO nobody reads (a blocked sink) against a regular file. Prints the ratios (goal >= 0.9; p99
blocked/unblocked <= 2)."""

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
WRITES, LOGINS, ROUNDS = 300, 20, 3


def serve(tmp: str, name: str, template: str, extra: tuple[str, ...]) -> testing.Controller:
    db = os.path.join(tmp, f"{name}.db")
    with open(template, "rb") as src, open(db, "wb") as dst:
        dst.write(src.read())
    return testing.start(db, PASSWORD, edge=False, extra=extra)


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
    tmp = tempfile.mkdtemp(prefix="events-bench-")
    template = os.path.join(tmp, "template.db")
    testing.make_template(template, admin_password=PASSWORD)
    off = serve(tmp, "off", template, ("--audit-days", "0"))
    on = serve(tmp, "on", template, ("--events", os.path.join(tmp, "events.jsonl")))
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    blocked = serve(tmp, "blocked", template, ("--events", fifo))
    try:
        w = {"off": [], "on": [], "blocked": []}
        lg = {"off": [], "on": []}
        for rnd in range(ROUNDS):
            for name, ctl in (("off", off), ("on", on), ("blocked", blocked)):
                xs = writes(ctl, f"r{rnd}", WRITES)
                w[name].append(len(xs) / sum(xs))
                w.setdefault(name + "_lat", []).extend(xs)
            for name, ctl in (("off", off), ("on", on)):
                lg[name].append(logins(ctl, LOGINS))
        wo, wn = statistics.median(w["off"]), statistics.median(w["on"])
        lo, ln = statistics.median(lg["off"]), statistics.median(lg["on"])
        print(f"writes/s   off {wo:8.1f}  on {wn:8.1f}  ratio {wn / wo:.2f}")
        print(f"logins/s   off {lo:8.1f}  on {ln:8.1f}  ratio {ln / lo:.2f}")
        pb, pu = p99(w["blocked_lat"]), p99(w["on_lat"])
        print(f"write p99  blocked sink {pb * 1000:.2f} ms  file sink {pu * 1000:.2f} ms  ratio {pb / pu:.2f}")
        metrics = httpx.get(blocked.url + "/metrics", verify=blocked.ca_file).text
        dropped = [line for line in metrics.splitlines() if line.startswith("ziti_lite_events_dropped_total")]
        print("blocked sink:", "; ".join(dropped))
    finally:
        for ctl in (off, on, blocked):
            ctl.stop()


if __name__ == "__main__":
    main()
