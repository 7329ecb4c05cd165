"""The bare baseline: Starlette + apsw doing the same reads as ziti-lite, on the same DB file.

No envelope logic, no auth, no filter language: a PK read of one identity row and a
``name contains`` page of 10 rows plus its count, each encoded with msgspec. It runs under
uvicorn with the same settings as ``ziti-lite serve`` (one worker, TLS with the same
certificate, no access log) so the two can be compared side by side.

The TLS context is built exactly as ``ziti-lite serve`` builds its own, from the certificate and
key stored in the same controller database (TLS 1.2+, client certificate requested).

    .venv/bin/python benchmarks/baseline.py --db DB --port 8443
"""

from __future__ import annotations

import argparse

import apsw
import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_enc = msgspec.json.Encoder()
conn: apsw.Connection | None = None


def _conn() -> apsw.Connection:
    global conn
    if conn is None:
        raise RuntimeError("call open_db() first")
    return conn


def open_db(path: str) -> None:
    global conn
    conn = apsw.Connection(path)
    conn.setbusytimeout(5000)
    conn.execute("PRAGMA journal_mode = WAL")


def _rows(cur) -> list[dict]:
    try:
        names = [d[0] for d in cur.getdescription()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(names, r)) for r in cur]


class JSON(Response):
    media_type = "application/json"


async def identity(request: Request) -> Response:
    rows = _rows(_conn().execute("SELECT * FROM identities WHERE id = ?", (request.path_params["id"],)))
    if not rows:
        return JSON(b'{"error":"not found"}', status_code=404)
    return JSON(_enc.encode({"data": rows[0], "meta": {}}))


async def identities(request: Request) -> Response:
    q = request.query_params
    needle = q.get("contains")
    limit = min(int(q.get("limit", "10")), 500)
    db = _conn()
    if needle:
        total = db.execute("SELECT count(*) FROM identities WHERE instr(name, ?)", (needle,)).fetchone()[0]
        rows = _rows(db.execute("SELECT * FROM identities WHERE instr(name, ?) ORDER BY id LIMIT ? OFFSET 0",
                                (needle, limit)))
    else:
        total = db.execute("SELECT count(*) FROM identities").fetchone()[0]
        rows = _rows(db.execute("SELECT * FROM identities ORDER BY id LIMIT ? OFFSET 0", (limit,)))
    meta = {"pagination": {"limit": limit, "offset": 0, "totalCount": total}}
    return JSON(_enc.encode({"data": rows, "meta": meta}))


async def static(request: Request) -> Response:
    return JSON(b'{"data":{"version":"v0.0.0"},"meta":{}}')


app = Starlette(routes=[
    Route("/edge/management/v1/identities/{id}", identity),
    Route("/edge/management/v1/identities", identities),
    Route("/static", static),
])


def main() -> None:
    ap = argparse.ArgumentParser(description="bare Starlette + apsw baseline")
    ap.add_argument("--db", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--loop", default="auto", choices=("auto", "uvloop", "asyncio"),
                    help="uvicorn's event loop (run.py gives both sides the same)")
    a = ap.parse_args()
    open_db(a.db)
    state = {k: v for k, v in _conn().execute("SELECT key, value FROM controller")}
    config = uvicorn.Config(app, host=a.host, port=a.port, log_level="warning", lifespan="off", loop=a.loop,
                            server_header=False, date_header=True, access_log=False)
    config.load()
    config.ssl = _ssl_context(state)
    print(f"baseline: serving on https://{a.host}:{a.port}", flush=True)
    uvicorn.Server(config).run()


def _ssl_context(state: dict):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ziti_lite.lifecycle.contexts import ssl_context  # the very same TLS set-up as ziti-lite serve
    return ssl_context(state)


if __name__ == "__main__":
    main()
