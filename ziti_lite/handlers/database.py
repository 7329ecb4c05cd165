"""The Database group: snapshot and data-integrity check/fix.

A check or fix runs in a worker thread on its own SQLite connection, so a scan of a large file
never stalls the event loop; one runs at a time (a second request is refused with 429, as
upstream). Results follow upstream: ``results`` is null until a problem is found, at most 1000
are kept (then ``tooManyErrors``), and a fix first writes a snapshot of the database.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import TYPE_CHECKING

from .. import clock, integrity
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import op
from ..db.store import Store
from ..errors import ApiError

if TYPE_CHECKING:
    from .common import HandlersController

MAX_RESULTS = 1000
SNAPSHOT_INTERVAL = 60.0  # seconds between two snapshots, as upstream


def _idle_job() -> dict:
    return {"inProgress": False, "fixingErrors": False, "tooManyErrors": False, "startTime": None,
            "endTime": None, "error": None, "results": None}


def _busy(ctl: HandlersController) -> bool:
    job = ctl.jobs.get("integrity")
    return bool(job and job.get("inProgress"))


def snapshot_path(db: str) -> str:
    """``<db>-YYYYMMDD-HHMMSS`` next to the database, as upstream names its snapshots."""
    return f"{os.path.abspath(db)}-{clock.now().strftime('%Y%m%d-%H%M%S')}"


def _scan(path: str, fix: bool) -> list[integrity.Problem]:
    store = Store(path)
    try:
        if fix:
            out = snapshot_path(path)
            if not os.path.exists(out):
                store.snapshot(out)
        return integrity.run(store, fix=fix)
    finally:
        store.close()


async def _run(ctl: HandlersController, fix: bool, done: threading.Event) -> None:
    job = ctl.jobs["integrity"]
    try:
        path = ctl.store.path
        if path in ("", ":memory:"):
            problems = integrity.run(ctl.store, fix=fix)  # no second connection can see it
        else:
            problems = await asyncio.to_thread(_scan, path, fix)
        results = [{"description": p.description, "fixed": p.fixed} for p in problems[:MAX_RESULTS]]
        job["results"] = results or None
        job["tooManyErrors"] = len(problems) > MAX_RESULTS
    except Exception as e:  # report, don't crash the server
        job["error"] = str(e)
    finally:
        job["inProgress"] = False
        job["endTime"] = clock.stamp()
        done.set()


def _start(ctx: Ctx, fix: bool):
    ctl = ctx.ctl
    if _busy(ctl):
        raise ApiError("RATE_LIMITED")
    ctl.jobs["integrity"] = {**_idle_job(), "inProgress": True, "fixingErrors": fix, "startTime": clock.stamp()}
    done = threading.Event()
    ctl.jobs["integrity_done"] = done  # tests and shutdown wait on it
    ctl.jobs["integrity_task"] = asyncio.get_running_loop().create_task(_run(ctl, fix, done))
    return env.empty(202)


@op("POST", "/database/check-data-integrity", op_id="checkDataIntegrity", tag="database", status=202)
async def check_integrity(ctx: Ctx):
    return _start(ctx, fix=False)


@op("POST", "/database/fix-data-integrity", op_id="fixDataIntegrity", tag="database", status=202)
async def fix_integrity(ctx: Ctx):
    return _start(ctx, fix=True)


@op("GET", "/database/data-integrity-results", op_id="dataIntegrityResults", tag="database")
async def integrity_results(ctx: Ctx):
    job = dict(ctx.ctl.jobs.get("integrity") or _idle_job())
    count = len(job["results"] or ())
    meta = {"pagination": {"limit": -1, "offset": 0, "totalCount": count}, "filterableFields": []}
    return env.ok(job, meta)


@op("POST", "/database/snapshot", op_id="createDatabaseSnapshot", tag="database")
async def snapshot(ctx: Ctx):
    ctl = ctx.ctl
    last = ctl.jobs.get("snapshot_at")
    if last is not None and time.monotonic() - last < SNAPSHOT_INTERVAL:
        raise ApiError("RATE_LIMITED")
    ctl.jobs["snapshot_at"] = time.monotonic()
    path = ctl.store.path
    out = snapshot_path(path)
    if not os.path.exists(out):
        await asyncio.to_thread(_snapshot, path, out)
    return env.empty()


def _snapshot(path: str, out: str) -> None:
    store = Store(path)
    try:
        store.snapshot(out)
    finally:
        store.close()
