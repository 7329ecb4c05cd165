"""The Database group: snapshot and data-integrity check/fix (one at a time, in the background)."""

from __future__ import annotations

import asyncio
import os
import time

from .. import clock, integrity
from ..api import envelope as env
from ..api.ops import op
from ..errors import ApiError


def _busy(ctl) -> bool:
    job = ctl.jobs.get("integrity")
    return bool(job and job.get("inProgress"))


async def _run(ctl, fix: bool) -> None:
    job = ctl.jobs["integrity"]
    try:
        await asyncio.sleep(0)  # answer the request first
        problems = integrity.run(ctl.store, fix=fix)
        job["results"] = [{"description": p.description, "fixed": p.fixed} for p in problems]
        job["tooManyErrors"] = False
    except Exception as e:  # report, don't crash the server
        job["error"] = str(e)
    finally:
        job["inProgress"] = False
        job["endTime"] = clock.stamp()


def _start(ctx, fix: bool):
    ctl = ctx.ctl
    if _busy(ctl):
        raise ApiError("RATE_LIMITED", 429)
    ctl.jobs["integrity"] = {"inProgress": True, "fixingErrors": fix, "startTime": clock.stamp(),
                             "endTime": None, "error": None, "results": [], "tooManyErrors": False}
    ctl.jobs["integrity_task"] = asyncio.get_running_loop().create_task(_run(ctl, fix))
    return env.empty(202)


@op("POST", "/database/check-data-integrity", op_id="checkDataIntegrity", tag="database", status=202)
async def check_integrity(ctx):
    return _start(ctx, fix=False)


@op("POST", "/database/fix-data-integrity", op_id="fixDataIntegrity", tag="database", status=202)
async def fix_integrity(ctx):
    return _start(ctx, fix=True)


@op("GET", "/database/data-integrity-results", op_id="dataIntegrityResults", tag="database")
async def integrity_results(ctx):
    job = ctx.ctl.jobs.get("integrity") or {"inProgress": False, "fixingErrors": False, "startTime": None,
                                             "endTime": None, "error": None, "results": [], "tooManyErrors": False}
    return env.ok({k: v for k, v in job.items()})


@op("POST", "/database/snapshot", op_id="createDatabaseSnapshot", tag="database")
async def snapshot(ctx):
    ctl = ctx.ctl
    last = ctl.jobs.get("snapshot_at", 0.0)
    if time.monotonic() - last < 60:
        raise ApiError("RATE_LIMITED", 429)
    ctl.jobs["snapshot_at"] = time.monotonic()
    base = os.path.abspath(ctl.settings.db)
    stamp = clock.now().strftime("%Y%m%d-%H%M%S")
    ctl.store.snapshot(f"{base}-{stamp}.snapshot")
    return env.empty()
