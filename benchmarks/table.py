"""``make bench``'s one table: ziti-lite beside its baselines, every figure from one run.

Runs, one after the other, ``run.py`` (ziti-lite vs the bare Starlette + apsw stack on the same
event loop), ``login_bench.py`` (password logins vs the raw KDF, 429 counts, floods),
``edge_bench.py`` (the embedded router vs a bare TLS relay; per-channel memory at 1,000 and
10,000 channels) and ``vs_openziti.py`` (the OpenZiti controller, where its binary is found),
each writing its figures as rows (``--json``), then prints them as one markdown table with the
date and the load average before and after. Each script's own detailed output is shown as it
runs. Options are passed to none of them: run a script alone for its options.

    .venv/bin/python benchmarks/table.py [--skip run,login,edge,openziti]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [  # name, script, extra arguments (the json flag is added)
    ("run", "run.py", ["--json"]),
    ("login", "login_bench.py", ["--json"]),
    ("edge", "edge_bench.py", ["--table-json"]),
    ("openziti", "vs_openziti.py", ["--json"]),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", default="", help="benchmarks to leave out (comma-separated: run,login,edge,openziti)")
    a = ap.parse_args()
    skip = {x.strip() for x in a.skip.split(",") if x.strip()}
    tmp = Path(tempfile.mkdtemp(prefix="ziti-lite-table-"))
    load0, t0 = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    sections: list[dict] = []
    failed: list[str] = []
    for name, script, flag in BENCHES:
        if name in skip:
            continue
        out = tmp / f"{name}.json"
        print(f"\n===== {script} =====", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / script), *flag, str(out)])
        if out.exists():
            sections.append(json.loads(out.read_text()))
        elif rc:
            failed.append(f"{script} (exit {rc})")
        else:
            failed.append(f"{script} (no figures: skipped, e.g. no OpenZiti binary)")
    load1 = os.getloadavg()
    print(f"\n===== make bench, {t0}; load average {' '.join(f'{x:.2f}' for x in load0)} at the start,"
          f" {' '.join(f'{x:.2f}' for x in load1)} at the end ({os.cpu_count()} CPUs) =====\n")
    print("| measurement | ziti-lite | baseline (same run) | ratio | goal | met? |")
    print("|---|---|---|---|---|---|")
    for sec in sections:
        la = " ".join(f"{x:.2f}" for x in sec["loadavg"])
        print(f"| **{sec['section']}** (load {la}) | | | | | |")
        for r in sec["rows"]:
            met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
            print(f"| {r['name']} | {r['value']} | {r['baseline']} | {ratio} | {r['goal']} | {met} |")
    for f in failed:
        print(f"\nnot in the table: {f}")
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()
