"""Health checks, Prometheus metrics and access records of a serving controller.

``GET /health-checks`` answers as upstream's ``health-checks`` API binding does:
``{"data": {"healthy": ..., "checks": [{"id", "healthy", "lastCheckDuration", "lastCheckTime",
"details"?, "err"?, "consecutiveFailures"?, "failingSince"?}]}, "meta": {}}`` (``?type=short``:
ids and verdicts only; ``/health-checks/controller/raft`` adds ``raft``, never enabled here).
The checks run when asked: ``sqlite.read`` (a read of the database), ``tls.server-certificate``
(healthy with ``"warning": true`` once the certificate is in its renewal window and was not
renewed, failing once it has ended), when the embedded router is configured,
``edge-router`` (it listens), and with ``--snapshot-every`` ``snapshots`` (the newest good
snapshot's age; failing while the last attempt failed or the newest is over twice the interval old).

``GET /metrics`` is the Prometheus text exposition format (0.0.4), rendered here (a handful of
series do not need the ``prometheus_client`` dependency): requests by API, operation, method and
status; request latency histograms by API and operation; logins by method and result; API
sessions and sessions in the database; seconds until the controller's certificates and the
soonest identity and router certificates end, and renewals of the controller's; the timed
snapshots (attempts by result, age of the newest good one, its duration, failing); the edge
router's channels, connections, terminators, connected identities, circuits since start, bytes
since start and bytes of its open channels.

Both are public, as upstream's health checks are; neither says anything about a particular
identity.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import time
import urllib.parse
from collections import defaultdict
from typing import Protocol

from starlette.responses import Response

from . import __version__, clock
from .api import envelope as env
from .auth.methods import METHODS
from .backup.schedule import Snapshotter
from .ctrl.server import CtrlController
from .edge.controller import EdgeController
from .errors import ApiError
from .ids import new_id
from .lifecycle import expiry
from .lifecycle.contexts import LifecycleController
from .logs import REQUEST_ID, access

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
PATHS = ("/health-checks", "/health-checks/controller/raft", "/metrics")


class ObservedController(EdgeController, CtrlController, LifecycleController, Protocol):
    """The controller as metrics and health checks see it (a Protocol: ``app`` imports this
    module, so naming ``app.Controller`` here would close a folder cycle)."""

    snapshots: Snapshotter | None


class Metrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str, int], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], list] = {}     # (api, op) -> [bucket counts..., sum, count]
        self.logins: dict[tuple[str, str], int] = defaultdict(int)
        # (api, permission) -> operations refused for want of it (app.Controller.authorize)
        self.refusals: dict[tuple[str, str], int] = defaultdict(int)
        self.started = time.time()

    def observe(self, api: str, op: str, method: str, status: int, seconds: float) -> None:
        self.requests[(api, op, method, status)] += 1
        h = self.latency.get((api, op))
        if h is None:
            h = self.latency[(api, op)] = [0] * (len(BUCKETS) + 1) + [0.0, 0]   # the last bucket: > 5 s
        h[bisect.bisect_left(BUCKETS, seconds)] += 1
        h[-2] += seconds
        h[-1] += 1

    def render(self, ctl: ObservedController) -> str:
        """The Prometheus text of every family, section by section."""
        out = _Lines()
        for section in (self._process, self._http, _database, _snapshots, _certificates, _events, _edge_router,
                        _ctrl):
            section(ctl, out)
        return "\n".join(out) + "\n"

    def _process(self, ctl: ObservedController, out: _Lines) -> None:
        out.family("ziti_lite_info", "gauge", "ziti-lite version and controller instance")
        out.append(f'ziti_lite_info{{version="{_esc(__version__)}",instance="{_esc(ctl.instance_id)}"}} 1')
        out.family("ziti_lite_start_time_seconds", "gauge", "when this process started serving (unix time)")
        out.append(f"ziti_lite_start_time_seconds {self.started:.3f}")

    def _http(self, ctl: ObservedController, out: _Lines) -> None:
        out.family("ziti_lite_http_requests_total", "counter",
                   "HTTP requests answered, by API, operation, method and status")
        for (api, op, method, status), n in sorted(self.requests.items()):
            out.append(
                f'ziti_lite_http_requests_total{{api="{_esc(api)}",operation="{_esc(op)}",'
                f'method="{_esc(method)}",status="{status}"}} {n}'
            )

        out.family("ziti_lite_http_request_duration_seconds", "histogram",
                   "time to answer a request, by API and operation")
        for (api, op), h in sorted(self.latency.items()):
            labels = f'api="{_esc(api)}",operation="{_esc(op)}"'
            running = 0
            for b, n in zip(BUCKETS, h):
                running += n
                out.append(f'ziti_lite_http_request_duration_seconds_bucket{{{labels},le="{b}"}} {running}')
            out.append(f'ziti_lite_http_request_duration_seconds_bucket{{{labels},le="+Inf"}} {h[-1]}')
            out.append(f"ziti_lite_http_request_duration_seconds_sum{{{labels}}} {h[-2]:.6f}")
            out.append(f"ziti_lite_http_request_duration_seconds_count{{{labels}}} {h[-1]}")

        out.family("ziti_lite_logins_total", "counter", "authentication requests, by method and result")
        for (method, result), n in sorted(self.logins.items()):
            out.append(f'ziti_lite_logins_total{{method="{_esc(method)}",result="{result}"}} {n}')

        out.family("ziti_lite_permission_refusals_total", "counter",
                   "operations refused to a valid session for want of a permission, by API and the permission"
                   " the operation needs (entity.action, or admin for admins only)")
        for (api, need), n in sorted(self.refusals.items()):
            out.append(f'ziti_lite_permission_refusals_total{{api="{_esc(api)}",permission="{_esc(need)}"}} {n}')


def _database(ctl: ObservedController, out: _Lines) -> None:
    store = ctl.store
    out.family("ziti_lite_api_sessions", "gauge", "API sessions in the database")
    out.append(f"ziti_lite_api_sessions {store.value('SELECT count(*) FROM api_sessions')}")
    out.family("ziti_lite_sessions", "gauge", "service (Dial/Bind) sessions in the database, by type")
    for kind, n in store.conn.execute("SELECT type, count(*) FROM sessions GROUP BY type ORDER BY type"):
        out.append(f'ziti_lite_sessions{{type="{_esc(kind)}"}} {n}')


def _snapshots(ctl: ObservedController, out: _Lines) -> None:
    """The timed snapshots (``--snapshot-every``, ``backup/schedule.py``): families always, samples
    while they run."""
    snaps = ctl.snapshots
    out.family("ziti_lite_snapshots_total", "counter", "timed snapshots attempted by this process, by result")
    out.family("ziti_lite_snapshot_age_seconds", "gauge",
               "seconds since the newest good snapshot in the snapshot folder was taken")
    out.family("ziti_lite_snapshot_last_success_timestamp_seconds", "gauge",
               "when the newest good snapshot was taken (unix time)")
    out.family("ziti_lite_snapshot_duration_seconds", "gauge", "seconds the last good snapshot took to write")
    out.family("ziti_lite_snapshot_failing", "gauge", "1 while the last snapshot attempt failed (the log says why)")
    if snaps is None:
        return
    out.append(f'ziti_lite_snapshots_total{{result="success"}} {snaps.ok}')
    out.append(f'ziti_lite_snapshots_total{{result="failure"}} {snaps.failed}')
    age = snaps.age()
    if age is not None and snaps.last_good is not None:
        out.append(f"ziti_lite_snapshot_age_seconds {age:.3f}")
        out.append(f"ziti_lite_snapshot_last_success_timestamp_seconds {snaps.last_good:.3f}")
    if snaps.last_seconds is not None:
        out.append(f"ziti_lite_snapshot_duration_seconds {snaps.last_seconds:.3f}")
    out.append(f"ziti_lite_snapshot_failing {int(snaps.error is not None)}")


def _certificates(ctl: ObservedController, out: _Lines) -> None:
    store = ctl.store
    out.family("ziti_lite_certificate_expiry_seconds", "gauge",
               "seconds until the end of the controller's certificates (server, signer, root) and of the"
               " soonest-ending identity and router certificates (negative: ended)")
    now = clock.now()
    for e in expiry.controller(ctl.state):
        out.append(f'ziti_lite_certificate_expiry_seconds{{certificate="{e.kind}"}} {e.seconds_left(now):.0f}')
    for kind in expiry.KINDS:
        first = expiry.soonest(store, kind)
        if first is not None:
            out.append(f'ziti_lite_certificate_expiry_seconds{{certificate="{kind}",id="{_esc(first.id or "")}"}}'
                       f" {first.seconds_left(now):.0f}")
    out.family("ziti_lite_certificate_renewals_total", "counter",
               "renewals of the controller's certificates by this process (at start and while serving)")
    for kind in expiry.CONTROLLER:
        out.append(f'ziti_lite_certificate_renewals_total{{certificate="{kind}"}} {ctl.cert_renewals.get(kind, 0)}')


def _events(ctl: ObservedController, out: _Lines) -> None:
    bus = ctl.events
    out.family("ziti_lite_events_total", "counter", "events published, by type")
    for namespace, n in sorted(bus.emitted.items()):
        out.append(f'ziti_lite_events_total{{type="{_esc(namespace)}"}} {n}')
    out.family("ziti_lite_events_dropped_total", "counter",
               "events dropped because a sink's queue was full, by sink (file, sse)")
    lost = bus.sink.lost if bus.sink is not None else 0   # lines a failed write lost
    for kind in sorted({"file", "sse", *bus.dropped}):
        n = bus.dropped.get(kind, 0) + (lost if kind == "file" else 0)
        out.append(f'ziti_lite_events_dropped_total{{sink="{_esc(kind)}"}} {n}')
    out.family("ziti_lite_events_queued", "gauge", "events waiting for the events file's writer")
    out.append(f"ziti_lite_events_queued {len(bus.sink.queue) if bus.sink is not None else 0}")


def _edge_router(ctl: ObservedController, out: _Lines) -> None:
    router = ctl.edge_router
    out.family("ziti_lite_edge_router_up", "gauge", "1 while the embedded edge router listens")
    out.append(f"ziti_lite_edge_router_up {int(router is not None)}")
    if router is not None:
        stats = router.stats()
        for key, help in (
            ("channels", "open SDK channels"),
            ("connections", "open edge connections"),
            ("terminators", "terminators hosted through this router"),
        ):
            out.family(f"ziti_lite_edge_router_{key}", "gauge", help)
            out.append(f"ziti_lite_edge_router_{key} {stats[key]}")
        out.family("ziti_lite_edge_router_identities", "gauge", "identities with an open channel")
        out.append(f"ziti_lite_edge_router_identities {len(router.identities)}")
        out.family("ziti_lite_edge_router_circuits_total", "counter", "circuits created since the router started")
        out.append(f"ziti_lite_edge_router_circuits_total {stats['circuits']}")
        out.family(
                   "ziti_lite_edge_router_open_channel_bytes",
                   "gauge",
                   "bytes received and sent by the channels open now, since each opened",
        )
        channels = list(router.channels)
        out.append(
            f'ziti_lite_edge_router_open_channel_bytes{{direction="in"}} {sum(c.bytes_in for c in channels)}'
        )
        out.append(
            f'ziti_lite_edge_router_open_channel_bytes{{direction="out"}} {sum(c.bytes_out for c in channels)}'
        )
        out.family("ziti_lite_edge_router_bytes_total", "counter",
                   "bytes received and sent by SDK channels since start")
        out.append(f'ziti_lite_edge_router_bytes_total{{direction="in"}} {stats["bytes_in"]}')
        out.append(f'ziti_lite_edge_router_bytes_total{{direction="out"}} {stats["bytes_out"]}')


def _ctrl(ctl: ObservedController, out: _Lines) -> None:
    ctrl = ctl.ctrl_server
    out.family("ziti_lite_ctrl_up", "gauge", "1 while the control channel for real routers listens")
    out.append(f"ziti_lite_ctrl_up {int(ctrl is not None)}")
    if ctrl is not None:
        stats = ctrl.stats()
        for key, kind, help in (
            ("routers", "gauge", "real routers online (connected and past their hello)"),
            ("channels", "gauge", "open control-channel connections, accepted or not yet"),
            ("circuits", "gauge", "live circuits through real routers"),
            ("links", "gauge", "router-to-router links the routers reported"),
            ("circuits_total", "counter", "circuits through real routers since start"),
            ("refused", "counter", "control-channel connections refused since start"),
        ):
            name = "ziti_lite_ctrl_refused_total" if key == "refused" else f"ziti_lite_ctrl_{key}"
            out.family(name, kind, help)
            out.append(f"{name} {stats[key]}")
    out.family("ziti_lite_edge_routers_online", "gauge", "edge routers online: the embedded one and real ones")
    out.append(f"ziti_lite_edge_routers_online {len(ctl.store.online_routers)}")


class _Lines(list):
    """The lines of the metrics text; ``family`` opens a metric family (its HELP and TYPE)."""

    def family(self, name: str, kind: str, help: str) -> None:
        self.append(f"# HELP {name} {help}")
        self.append(f"# TYPE {name} {kind}")


def _esc(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ---------------------------------------------------------------- health checks
def go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration`` prints it (``0s``, ``812ns``, ``41.2µs``, ``3.5ms``, ``1.25s``)."""
    ns = int(round(seconds * 1e9))
    if ns == 0:
        return "0s"
    for unit, size in (("ns", 1), ("µs", 1_000), ("ms", 1_000_000)):
        if ns < size * 1000:
            return f"{ns / size:.6f}".rstrip("0").rstrip(".") + unit
    return f"{ns / 1e9:.9f}".rstrip("0").rstrip(".") + "s"


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Health:
    def __init__(self) -> None:
        self.failures: dict[str, tuple[int, float]] = {}  # check id -> (consecutive failures, since)

    def _db(self, ctl: ObservedController) -> str:
        ctl.store.value("SELECT count(*) FROM controller")
        return "database read"

    def _router(self, ctl: ObservedController) -> str:
        router = ctl.edge_router
        if router is None or router.server is None or not router.server.is_serving():
            raise RuntimeError("the embedded edge router is not listening")
        return f"listening on {router.url}, {len(router.channels)} channel(s)"

    def _ctrl(self, ctl: ObservedController) -> str:
        ctrl = ctl.ctrl_server
        if ctrl is None or ctrl.server is None or not ctrl.server.is_serving():
            raise RuntimeError("the control channel is not listening")
        online = sorted(ch.name or rid for rid, ch in ctrl.routers.items() if ch.ready)
        return f"listening on {ctrl.address}, {len(online)} router(s) online" + (f": {', '.join(online)}" if online
                                                                                   else "")

    def _snapshots(self, ctl: ObservedController) -> str:
        if ctl.snapshots is None:
            raise RuntimeError("timed snapshots are configured but not running")
        return ctl.snapshots.health()

    def _server_cert(self, ctl: ObservedController) -> str:
        level, text = expiry.server_state(ctl.state)
        if level == "failing":
            raise RuntimeError(text)
        return ("warning: " if level == "warning" else "") + text

    def run(self, ctl: ObservedController, short: bool) -> dict:
        checks = [("sqlite.read", self._db), ("tls.server-certificate", self._server_cert)]
        if ctl.settings.edge_port or ctl.edge_sock is not None:
            checks.append(("edge-router", self._router))
        if ctl.settings.ctrl_port or ctl.ctrl_sock is not None:
            checks.append(("ctrl.listener", self._ctrl))
        if ctl.settings.snapshot_every:
            checks.append(("snapshots", self._snapshots))
        results = []
        for id, fn in checks:
            start = time.time()
            t0 = time.perf_counter()
            try:
                details, err = fn(ctl), None
            except Exception as e:  # a failing check is a verdict, not a 500
                details, err = None, str(e) or type(e).__name__
            took = time.perf_counter() - t0
            r: dict = {"id": id, "healthy": err is None}
            if err is None:
                self.failures.pop(id, None)
            else:
                count, since = self.failures.get(id, (0, start))
                self.failures[id] = (count + 1, since)
            if not short:
                r["lastCheckDuration"] = go_duration(took)
                r["lastCheckTime"] = _stamp(start)
                if err is not None:
                    r["err"] = err
                    r["consecutiveFailures"] = self.failures[id][0]
                    r["failingSince"] = _stamp(self.failures[id][1])
                else:
                    r["details"] = details
                    if details and details.startswith("warning: "):
                        r["warning"] = True
            results.append(r)
        return {"healthy": all(r["healthy"] for r in results), "checks": results}


# ---------------------------------------------------------------- the ASGI side
class Observer:
    """Wraps the controller: answers /health-checks and /metrics, counts and times every other
    request, and (with JSON logs) gives each one a request id and an access record."""

    def __init__(self, ctl: ObservedController, access_log: bool):
        self.ctl = ctl
        self.metrics = Metrics()
        self.health = Health()
        self.access_log = access_log

    async def special(self, scope, receive, send) -> None:
        path, method = scope["path"], scope["method"]
        response: Response
        if method not in ("GET", "HEAD"):
            response = env.error_response(ApiError("METHOD_NOT_ALLOWED"))
        elif path == "/metrics":
            response = Response(self.metrics.render(self.ctl), media_type="text/plain; version=0.0.4; charset=utf-8")
        else:
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
            body: dict = {"data": self.health.run(self.ctl, query.get("type") == ["short"]), "meta": {}}
            if path.endswith("/controller/raft"):
                body["raft"] = {"isLeader": False, "isRaftEnabled": False}
            response = Response(json.dumps(body, indent=4) + "\n", media_type="application/json")
        await response(scope, receive, send)

    async def __call__(self, scope, receive, send, app) -> None:
        token = REQUEST_ID.set(new_id()) if self.access_log else None
        t0 = time.perf_counter()
        try:
            await app(scope, receive, send)
        finally:
            took = time.perf_counter() - t0
            status = scope.get("zl.status", 500)  # set as the controller answers; 500 if it never did
            route = scope.get("zl.route")
            api, op = (route.api, route.op_id) if route is not None else ("none", "")
            self.metrics.observe(api, op, scope["method"], status, took)
            refused = scope.get("zl.refused")
            if refused is not None:
                self.metrics.refusals[(api, refused)] += 1
            if op == "authenticate":
                query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
                method = (query.get("method") or [""])[0]
                method = method if method in METHODS else "other"  # bounded label values: the registered ones
                self.metrics.logins[(method, "success" if status == 200 else "failure")] += 1
            if token is not None:
                client = scope.get("client")
                access.info(
                    "%s %s %s",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "durationMs": round(took * 1000, 3),
                        "operation": op or None,
                        "client": f"{client[0]}:{client[1]}" if client else None,
                    },
                )
                REQUEST_ID.reset(token)
