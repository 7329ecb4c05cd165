"""The admin console of today, ZAC 4.5.1, in a real browser against ``ziti-lite serve --zac``:
it logs in by OIDC (not ``/authenticate``), lists identities, refreshes its token when the
controller answers 401 and carries on (also after a refresh whose answer it lost), logs out revoking its refresh token
(``POST /oidc/oauth/revoke``), and shows an identity holding only ``["identity.read"]`` the
identities without an add button, and the services it may not read as a notice, without bouncing
it to the login page; and when an admin ends that identity's API session, the console's next
request is 401, its refresh is refused and it goes back to the login page.

Needs a built ZAC 4.5.1 (the folder ``serve --zac`` takes: ``$ZITI_LITE_ZAC45``, else
``~/.cache/ziti-lite/zac-4.5.1``), Chromium at ``/usr/bin/chromium`` and the ``playwright``
Python package (its API only: the browser is Debian's); skipped, saying which, where one is
missing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import ssl
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ziti_lite import testing

pytestmark = pytest.mark.interop

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--ignore-certificate-errors"]
NAV = "a.side-navigator-menu-item:has-text('{}')"


def zac_dir() -> Path:
    d = Path(os.environ.get("ZITI_LITE_ZAC45") or Path.home() / ".cache" / "ziti-lite" / "zac-4.5.1")
    if not (d / "index.html").exists():
        pytest.skip(f"no built ZAC 4.5.1 at {d} (index.html; $ZITI_LITE_ZAC45 names another folder)")
    return d


@pytest.fixture(scope="module")
def console(ziti_lite_template, tmp_path_factory):
    zac = zac_dir()
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian's package chromium)")
    pytest.importorskip("playwright.sync_api", reason="no playwright Python package (pip install playwright)")
    db = ziti_lite_template.copy(tmp_path_factory.mktemp("zac45") / "net.db")
    ctl = testing.start(db, ziti_lite_template.admin_password, edge=False, extra=("--zac", str(zac)))
    try:
        yield ctl
    finally:
        ctl.stop()
        shutil.rmtree(ctl.tmp, ignore_errors=True)


@contextlib.contextmanager
def console_page(answers: list[tuple[str, str, int]]) -> Iterator:
    """A page of a fresh headless Chromium; each answer it gets goes into ``answers`` as
    (method, path, status), the console's double slashes made single."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_context(ignore_https_errors=True, viewport={"width": 1400, "height": 900}).new_page()
            page.on("response", lambda r: answers.append(
                (r.request.method, urllib.parse.urlsplit(r.url).path.replace("//", "/"), r.status)))
            yield page
        finally:
            browser.close()


def _form(ctl: testing.Controller, path: str, fields: dict) -> int:
    """POST a form to the controller (OAuth's endpoints); the status."""
    req = urllib.request.Request(ctl.url + path, data=urllib.parse.urlencode(fields).encode(), method="POST",
                                 headers={"content-type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ctl.ca_file), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_zac45_oidc_login_refresh_logout_and_a_limited_identity(console):
    ctl = console
    reader_password = "Reader-pass-1"
    ctl.delegate("reader", ["identity.read"], password=reader_password)
    seen: list[tuple[str, str, int]] = []     # (method, path, status) of every API answer

    def since(mark: int, prefix: str = "") -> list[tuple[str, str, int]]:
        return [s for s in seen[mark:] if s[1].startswith(prefix)]

    with console_page(seen) as page:

        def login(user: str, password: str) -> dict:
            page.goto(ctl.url + "/zac/login", wait_until="networkidle")
            page.fill("#Username", user)
            page.fill("#Password", password)
            page.click("button.login-button")
            page.wait_for_url("**/zac/dashboard", timeout=30_000)
            return json.loads(page.evaluate("localStorage.getItem('ziti.settings')"))["session"]

        def identities() -> None:
            page.click(NAV.format("Identities"))
            page.wait_for_url("**/zac/identities", timeout=15_000)
            page.wait_for_selector("text=Default Admin", timeout=15_000)
            page.wait_for_selector("text=reader", timeout=15_000)

        # 1. the admin logs in by OIDC: authorize, the login step, the code's exchange
        session = login(ctl.admin_user, ctl.admin_password)
        assert session["authMode"] == "oidc" and session["refreshToken"]
        flow = [(m, path, st) for m, path, st in since(0, "/oidc/")]
        assert ("GET", "/oidc/authorize", 302) in flow, flow
        assert ("POST", "/oidc/login/username", 302) in flow, flow
        assert ("POST", "/oidc/oauth/token", 200) in flow, flow
        assert not [s for s in seen if s[1].endswith("/authenticate")], "fell back to /authenticate"

        # 2. the identities, with the add button an admin has
        identities()
        assert page.locator("[data-action=add]").count() == 1

        # 3. its access token revoked behind its back: a 401, a refresh, and on it goes
        assert _form(ctl, "/oidc/revoke", {"token": session["id"]}) == 200
        mark = len(seen)
        page.click(NAV.format("Services"))
        page.wait_for_url("**/zac/services", timeout=15_000)
        page.wait_for_timeout(1500)
        identities()
        after = since(mark, "/")
        assert any(st == 401 for _, path, st in after if path.startswith("/edge/management/v1/")), after
        assert ("POST", "/oidc/oauth/token", 200) in after, after
        refreshed = json.loads(page.evaluate("localStorage.getItem('ziti.settings')"))["session"]
        assert refreshed["id"] != session["id"] and refreshed["authMode"] == "oidc"
        last = [s for s in after if s[1] == "/edge/management/v1/identities"][-1]
        assert last[2] == 200, after

        # 3b. a refresh the controller answered but whose answer the page never got (reloaded
        #     meanwhile): after the reload it refreshes with the token it still holds, and stays
        assert _form(ctl, "/oidc/revoke", {"token": refreshed["id"]}) == 200
        lost: list[int] = []

        def drop(route) -> None:
            lost.append(route.fetch().status)
            route.abort()

        page.route("**/oidc/oauth/token", drop)
        page.click(NAV.format("Services"))
        page.wait_for_url("**/zac/services", timeout=15_000)
        page.wait_for_timeout(1500)
        page.unroute("**/oidc/oauth/token")
        assert lost and lost[0] == 200, lost
        page.goto(ctl.url + "/zac/identities", wait_until="networkidle")
        page.wait_for_selector("text=Default Admin", timeout=15_000)
        assert page.url.endswith("/zac/identities")
        refreshed = json.loads(page.evaluate("localStorage.getItem('ziti.settings')"))["session"]

        # 4. logout revokes the refresh token: it no longer refreshes
        mark = len(seen)
        page.click("#UserButton")
        page.click("#LogoutButton")
        page.click("button.confirm")
        page.wait_for_url("**/zac/login", timeout=15_000)
        page.wait_for_timeout(500)
        assert ("POST", "/oidc/oauth/revoke", 200) in since(mark), since(mark)
        assert _form(ctl, "/oidc/oauth/token", {"grant_type": "refresh_token", "client_id": "openziti",
                                                "refresh_token": refreshed["refreshToken"]}) == 400

        # 5. an identity with ["identity.read"]: the identities, no add button, not bounced
        mark = len(seen)
        login("reader", reader_password)
        identities()
        page.wait_for_timeout(1500)
        assert page.locator("[data-action=add]").count() == 0
        assert page.url.endswith("/zac/identities")
        reads = [s for s in since(mark) if s[1] in ("/edge/management/v1/identities",
                                                     "/edge/management/v1/current-identity")]
        assert reads and all(st == 200 for *_, st in reads), reads
        # what it may not read, the console says so, and keeps it logged in
        page.click(NAV.format("Services"))
        page.wait_for_selector("text=You do not have permission to view services", timeout=15_000)
        assert page.url.endswith("/zac/services")

        # 6. an admin ends its API session: a 401, the refresh refused, back to the login page
        ended = [a["id"] for a in ctl.client.get("/api-sessions").data if a["identity"]["name"] == "reader"]
        assert len(ended) == 1 and ctl.client.delete(f"/api-sessions/{ended[0]}").status == 200
        mark = len(seen)
        page.click(NAV.format("Identities"))
        page.wait_for_url("**/zac/login", timeout=15_000)
        assert ("POST", "/oidc/oauth/token", 400) in since(mark), since(mark)
