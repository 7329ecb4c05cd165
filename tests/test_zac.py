"""``ziti-lite serve --zac DIR``: a built single-page app at /zac/ and /assets/ on the API's
HTTPS port, with the index.html fallback for deep links; the APIs around it unchanged."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys

import httpx
import pytest

from ziti_lite import testing

pytestmark = pytest.mark.slow   # real servers in subprocesses

INDEX = '<!doctype html><html><head><base href="/zac/"></head><body><app-root></app-root></body></html>'


@pytest.fixture(scope="module")
def spa(tmp_path_factory):
    d = tmp_path_factory.mktemp("zac")
    (d / "index.html").write_text(INDEX)
    (d / "main.js").write_text("console.log('main')")
    (d / "assets").mkdir()
    (d / "assets" / "x.js").write_text("export const x = 1;")
    (d / "assets" / "logo.svg").write_text("<svg/>")
    return d


@pytest.fixture(scope="module")
def served(spa, ziti_lite_template, tmp_path_factory):
    db = ziti_lite_template.copy(tmp_path_factory.mktemp("zacdb") / "net.db")
    ctl = testing.start(db, ziti_lite_template.admin_password, edge=False, extra=("--zac", str(spa)))
    with httpx.Client(base_url=ctl.url, verify=ssl.create_default_context(cafile=ctl.ca_file), timeout=10) as c:
        yield c
    ctl.stop()


def test_console_index_deep_links_and_assets(served):
    r = served.get("/zac/")
    assert r.status_code == 200 and r.text == INDEX
    assert r.headers["content-type"].startswith("text/html")
    for deep in ("/zac/identities", "/zac/identities/Zx1-abc/edit", "/zac/services?tab=2"):
        r = served.get(deep)
        assert r.status_code == 200 and r.text == INDEX, deep
    r = served.get("/zac/main.js")
    assert r.status_code == 200 and r.text == "console.log('main')"
    assert "javascript" in r.headers["content-type"]
    r = served.get("/assets/x.js")
    assert r.status_code == 200 and r.text == "export const x = 1;"
    assert served.get("/zac/assets/logo.svg").text == "<svg/>"
    r = served.get("/zac")
    assert r.status_code == 301 and r.headers["location"] == "/zac/"
    assert served.head("/zac/main.js").status_code == 200


def test_outside_the_console_the_apis_answer(served):
    r = served.get("/assets/missing.js")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    r = served.post("/zac/", json={})
    assert r.status_code == 405 and r.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    # no file outside DIR, however the path is spelled
    for sneaky in ("/zac/../../../etc/passwd", "/zac/%2e%2e/%2e%2e/etc/passwd", "/assets/../../etc/passwd"):
        r = served.get(sneaky)
        assert "root:" not in r.text
    assert served.get("/version").json()["data"]["apiVersions"]["edge"]["v1"]["path"] == "/edge/client/v1"
    assert served.get("/zacx").status_code == 404   # only /zac and /zac/...
    assert served.get("/edge/management/v1/identities").status_code == 401


def test_console_from_environment_and_absent_without_it(spa, ziti_lite_template, tmp_path):
    db = ziti_lite_template.copy(tmp_path / "env.db")
    ctl = testing.start(db, ziti_lite_template.admin_password, edge=False, env={"ZITI_LITE_ZAC": str(spa)})
    try:
        assert httpx.get(ctl.url + "/zac/users", verify=ssl.create_default_context(cafile=ctl.ca_file)).text == INDEX
    finally:
        ctl.stop()
    db = ziti_lite_template.copy(tmp_path / "none.db")
    ctl = testing.start(db, ziti_lite_template.admin_password, edge=False, env={"ZITI_LITE_ZAC": ""})
    try:
        r = httpx.get(ctl.url + "/zac/", verify=ssl.create_default_context(cafile=ctl.ca_file))
        assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    finally:
        ctl.stop()


def test_zac_dir_without_index_is_refused(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "ziti_lite", "serve", "--db", str(tmp_path / "x.db"), "--zac", str(tmp_path),
         "--ctrl-port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "index.html" in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_console_files_get_access_records(spa, ziti_lite_template, tmp_path):
    """The access log records every request, the console's files included."""
    db = ziti_lite_template.copy(tmp_path / "net.db")
    ctl = testing.start(db, ziti_lite_template.admin_password, edge=False,
                        extra=("--zac", str(spa), "--log-format", "json", "--log-level", "info"))
    try:
        with httpx.Client(base_url=ctl.url, verify=ssl.create_default_context(cafile=ctl.ca_file), timeout=10) as c:
            assert c.get("/zac/main.js").status_code == 200
            assert c.get("/zac/some/deep/link").status_code == 200
    finally:
        ctl.stop()  # flushes its output
    records = [json.loads(line) for line in ctl.output.splitlines() if line.strip().startswith("{")]
    access = {(r["path"], r["status"]) for r in records if r.get("logger") == "ziti_lite.access"}
    assert {("/zac/main.js", 200), ("/zac/some/deep/link", 200)} <= access
