"""Health checks (/health-checks as upstream answers them), Prometheus metrics (/metrics), JSON
logs with request ids, and every ``serve`` option from a ZITI_LITE_* environment variable."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from tests.builders import Net
from tests.conftest import CLIENT, MGMT, assert_error
from tests.lifecycle.test_expiry import enrolled
from ziti_lite import clock, testing
from ziti_lite.events.bus import Subscriber
from ziti_lite.lifecycle import renewal
from ziti_lite.observe import go_duration
from ziti_lite.pki import ca

SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+]+|\+Inf)$'
)


def parse_metrics(text: str) -> dict[str, float]:
    """Check the text exposition format line by line; return {sample with labels: value}."""
    assert text.endswith("\n")
    typed: set[str] = set()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind in ("counter", "gauge", "histogram") and name not in typed, line
            typed.add(name)
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        family = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
        assert m.group(1) in typed or family in typed, f"sample before its TYPE: {line}"
        key = line.rsplit(" ", 1)[0]
        assert key not in samples, f"duplicate sample {key}"
        samples[key] = float(m.group(4))
    return samples


# ------------------------------------------------------------------ health checks
def test_health_checks_as_upstream(anon):
    r = anon.client.get("/health-checks")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["meta"] == {} and body["data"]["healthy"] is True
    check, cert = body["data"]["checks"]  # no edge router configured in-process
    assert check["id"] == "sqlite.read" and check["healthy"] is True
    assert cert["id"] == "tls.server-certificate" and cert["healthy"] is True and "warning" not in cert
    assert re.fullmatch(r"[0-9.]+(ns|µs|ms|s)", check["lastCheckDuration"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", check["lastCheckTime"])
    short = anon.client.get("/health-checks?type=short").json()["data"]
    assert short == {"healthy": True, "checks": [{"id": "sqlite.read", "healthy": True},
                                                 {"id": "tls.server-certificate", "healthy": True}]}
    raft = anon.client.get("/health-checks/controller/raft")
    assert raft.status_code == 200 and raft.json()["raft"] == {"isLeader": False, "isRaftEnabled": False}
    assert_error(anon.client.post("/health-checks"), 405, "METHOD_NOT_ALLOWED")
    assert_error(anon.client.get("/health-checks/other"), 404, "NOT_FOUND")


def test_an_absent_edge_router_is_unhealthy(anon, ctl):
    ctl.settings.edge_port = 3022  # configured, but this in-process controller runs none
    first = anon.client.get("/health-checks").json()["data"]
    assert first["healthy"] is False
    router = {c["id"]: c for c in first["checks"]}["edge-router"]
    assert router["healthy"] is False and "not listening" in router["err"] and router["consecutiveFailures"] == 1
    again = {c["id"]: c for c in anon.client.get("/health-checks").json()["data"]["checks"]}["edge-router"]
    assert again["consecutiveFailures"] == 2 and again["failingSince"] == router["failingSince"]


def test_the_server_certificate_check_warns_in_its_window_and_fails_after_its_end(anon, ctl):
    def cert_check():
        body = anon.client.get("/health-checks").json()["data"]
        return body["healthy"], {c["id"]: c for c in body["checks"]}["tls.server-certificate"]

    healthy, check = cert_check()
    assert healthy and check["healthy"] and check["details"].startswith("the TLS server certificate ends in 365.0")
    # past the renewal point without a renewal (no server runs here, so no janitor renews it)
    end = ca.cert_info(ctl.state["server_cert"])["not_after"]
    clock.advance((renewal.renew_at(ctl.state["server_cert"]) - clock.now()).total_seconds() + 60)
    healthy, check = cert_check()
    assert healthy and check["healthy"] and check["warning"] is True
    assert check["details"].startswith("warning: the TLS server certificate ends in 121.")
    clock.advance((end - clock.now()).total_seconds() + 1)
    healthy, check = cert_check()
    assert not healthy and not check["healthy"] and "ended at" in check["err"] and check["consecutiveFailures"] == 1


def test_metrics_carry_seconds_until_each_certificate_ends(anon, ctl, admin):
    iid = enrolled(anon, admin, "expiring-soon")
    m = parse_metrics(anon.client.get("/metrics").text)
    now = clock.now()
    for kind in ("server", "signer", "root"):
        end = ca.cert_info(ctl.state[f"{kind}_cert"])["not_after"]
        got = m[f'ziti_lite_certificate_expiry_seconds{{certificate="{kind}"}}']
        assert abs(got - (end - now).total_seconds()) < 30
        assert m[f'ziti_lite_certificate_renewals_total{{certificate="{kind}"}}'] == 0
    leaf = ctl.store.value("SELECT cert_pem FROM authenticators WHERE identity_id = ?", (iid,))
    got = m[f'ziti_lite_certificate_expiry_seconds{{certificate="identity",id="{iid}"}}']
    assert abs(got - (ca.cert_info(leaf)["not_after"] - now).total_seconds()) < 30
    clock.advance(86400)     # a day later, a day less
    m2 = parse_metrics(anon.client.get("/metrics").text)
    assert abs(m['ziti_lite_certificate_expiry_seconds{certificate="server"}']
               - m2['ziti_lite_certificate_expiry_seconds{certificate="server"}'] - 86400) < 30


@pytest.mark.parametrize(
    "seconds,text", [(0, "0s"), (812e-9, "812ns"), (41.2e-6, "41.2µs"), (0.0035, "3.5ms"), (1.25, "1.25s")]
)
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text


# ------------------------------------------------------------------ metrics
def test_metrics_count_requests_logins_and_sessions(anon):
    admin = anon.login()   # the one successful password login counted below
    assert admin.get("/identities").status_code == 200
    assert admin.get("/identities").status_code == 200
    assert admin.get("/services/nope").status_code == 404
    anon.client.post(MGMT + "/authenticate?method=password", json={"username": "admin", "password": "wrong"})
    anon.client.post(CLIENT + "/authenticate?method=bogus", json={})
    r = anon.client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    m = parse_metrics(r.text)
    assert (
        m['ziti_lite_http_requests_total{api="management",operation="listIdentities",method="GET",status="200"}'] == 2
    )
    assert m['ziti_lite_http_requests_total{api="management",operation="detailService",method="GET",status="404"}'] == 1
    assert m['ziti_lite_logins_total{method="password",result="success"}'] == 1
    assert m['ziti_lite_logins_total{method="password",result="failure"}'] == 1
    assert m['ziti_lite_logins_total{method="other",result="failure"}'] == 1
    assert m["ziti_lite_api_sessions"] >= 1
    assert m["ziti_lite_edge_router_up"] == 0
    labels = 'api="management",operation="listIdentities"'
    buckets = [v for k, v in m.items() if k.startswith(f"ziti_lite_http_request_duration_seconds_bucket{{{labels},")]
    assert buckets == sorted(buckets) and buckets[-1] == 2
    assert m[f"ziti_lite_http_request_duration_seconds_count{{{labels}}}"] == 2
    # /metrics and /health-checks are not counted as API operations, nor do they need a session
    assert not any("metrics" in k or "health" in k for k in m if k.startswith("ziti_lite_http_requests_total"))


def test_metrics_count_refused_operations_by_the_permission_they_need(anon):
    admin = anon.login()
    net = Net(admin)
    ident, username = net.user()
    assert admin.patch(f"/identities/{ident}", json={"permissions": ["service.read"]}).status_code == 200
    delegate = net.login(username, prefix=MGMT)
    assert delegate.get("/services").status_code == 200
    assert delegate.get("/identities").status_code == 401
    assert delegate.get("/identities/x").status_code == 401
    assert delegate.post("/services", json={}).status_code == 401
    assert delegate.get("/summary").status_code == 401
    assert anon.get("/identities").status_code == 401   # no session: not a permission's refusal
    m = parse_metrics(anon.client.get("/metrics").text)
    refusals = {k: v for k, v in m.items() if k.startswith("ziti_lite_permission_refusals_total")}
    assert refusals == {
        'ziti_lite_permission_refusals_total{api="management",permission="identity.read"}': 2,
        'ziti_lite_permission_refusals_total{api="management",permission="service.create"}': 1,
        'ziti_lite_permission_refusals_total{api="management",permission="admin"}': 1,
    }


# ------------------------------------------------------------------ a real server: edge router, JSON logs
@pytest.fixture(scope="module")
def json_server(ziti_lite_template, tmp_path_factory):
    db = ziti_lite_template.copy(tmp_path_factory.mktemp("observe") / "net.db")
    ctl = testing.start(db, ziti_lite_template.admin_password, extra=("--log-format", "json", "--log-level", "info"))
    yield ctl
    ctl.stop()


@pytest.mark.slow
def test_edge_router_in_health_and_metrics(json_server):
    tls = ssl.create_default_context(cafile=json_server.ca_file)
    checks = {c["id"]: c for c in httpx.get(json_server.url + "/health-checks", verify=tls).json()["data"]["checks"]}
    assert checks["edge-router"]["healthy"] is True
    assert f":{json_server.edge_port}" in checks["edge-router"]["details"]
    m = parse_metrics(httpx.get(json_server.url + "/metrics", verify=tls).text)
    assert m["ziti_lite_edge_router_up"] == 1 and m["ziti_lite_edge_router_channels"] == 0
    assert m['ziti_lite_edge_router_open_channel_bytes{direction="in"}'] == 0


@pytest.mark.slow
def test_json_logs_with_request_ids_and_no_secrets(json_server):
    tls = ssl.create_default_context(cafile=json_server.ca_file)
    client = json_server.client
    token = client.login()
    error = httpx.get(json_server.url + MGMT + "/identities/nope", headers={"zt-session": token}, verify=tls).json()
    rid = error["error"]["requestId"]
    iid = client.create_identity("logged")
    ott = client.get(f"/identities/{iid}").data["enrollment"]["ott"]["token"]
    httpx.post(json_server.url + f"/edge/client/v1/enroll?method=ott&token={ott}", content=b"junk", verify=tls)
    json_server.stop()  # flushes its output
    lines = [line for line in json_server.output.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    (record,) = [r for r in records if r.get("requestId") == rid]
    assert record["logger"] == "ziti_lite.access" and record["status"] == 404
    assert record["path"] == MGMT + "/identities/nope" and record["operation"] == "detailIdentity"
    assert record["method"] == "GET" and record["durationMs"] >= 0
    assert len({r["requestId"] for r in records if r["logger"] == "ziti_lite.access"}) == len(
        [r for r in records if r["logger"] == "ziti_lite.access"]
    )  # one id per request
    text = json_server.output
    assert token not in text and ott not in text and json_server.admin_password not in text


# ------------------------------------------------------------------ environment variables
@pytest.mark.slow
def test_every_serve_option_from_the_environment(tmp_path, spa_dir):
    port, edge_port = testing.free_port(), testing.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ZITI_LITE_")},
        "ZITI_LITE_DB": str(tmp_path / "env.db"),
        "ZITI_LITE_HOST": "127.0.0.1",
        "ZITI_LITE_PORT": str(port),
        "ZITI_LITE_ADVERTISE": "localhost",
        "ZITI_LITE_ADMIN_USER": "boss",
        "ZITI_LITE_ADMIN_PASSWORD": "Env-Passw0rd",
        "ZITI_LITE_EDGE_PORT": str(edge_port),
        "ZITI_LITE_ROUTER_NAME": "env-router",
        "ZITI_LITE_ZAC": str(spa_dir),
        "ZITI_LITE_CTRL_PORT": "0",
        "ZITI_LITE_LOG_LEVEL": "INFO",
        "ZITI_LITE_LOG_FORMAT": "json",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "ziti_lite", "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + testing.START_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(url + "/version", verify=False, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read()
        v = httpx.get(url + "/version", verify=False).json()["data"]
        assert v["apiVersions"]["edge-management"]["v1"]["apiBaseUrls"] == [
            f"https://localhost:{port}/edge/management/v1"
        ]
        r = httpx.post(
            url + MGMT + "/authenticate?method=password",
            json={"username": "boss", "password": "Env-Passw0rd"},
            verify=False,
        )
        assert r.status_code == 200
        routers = httpx.get(
            url + MGMT + "/edge-routers", headers={"zt-session": r.json()["data"]["token"]}, verify=False
        ).json()["data"]
        assert [(x["name"], x["isOnline"]) for x in routers] == [("env-router", True)]
        assert httpx.get(url + "/zac/x", verify=False).text == "<html>spa</html>"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert all(json.loads(line) for line in out.splitlines() if line.strip())  # the JSON format too


@pytest.fixture
def spa_dir(tmp_path):
    d = tmp_path / "spa"
    d.mkdir()
    (d / "index.html").write_text("<html>spa</html>")
    return d


def test_metrics_count_events_and_drops(anon, ctl):
    class Full(Subscriber):   # a sink whose queue is always full
        kind = "file"

        def offer(self, namespace, line, event):
            return False

    ctl.events.subscribe(Full())
    admin = anon.login()
    admin.create("services", {"name": "metered", "encryptionRequired": True})
    m = parse_metrics(anon.client.get("/metrics").text)
    assert m['ziti_lite_events_total{type="entityChange"}'] == 2          # created, committed
    assert m['ziti_lite_events_total{type="edge.apiSessions"}'] == 1      # the login
    assert m['ziti_lite_events_dropped_total{sink="file"}'] >= 4
    assert m['ziti_lite_events_dropped_total{sink="sse"}'] == 0
    assert m["ziti_lite_events_queued"] == 0
