"""ZAC 4.5.1, the console of today, walked page by page against ziti-lite and the real OpenZiti
v2.0.3 controller, and the two walks compared.

The same network goes into each controller through its management API (one identity, config
type, config, service, service policy, edge router policy, service edge router policy, posture
check, edge router, transit router, external JWT signer and auth policy); then an admin logs in
to the console by OIDC and opens every page of its routes: the dashboard, each list, the
attribute, profile, settings and visualizer pages, and the detail page of each entity made. At
each page the walk keeps what went wrong: the controller's answers of 400 or more, the console's
error message (its "growler") and the browser's console errors. ziti-lite serves the console
itself (``serve --zac``); for v2.0.3 this test serves the same build from a loopback HTTP server
and names the controller on the console's login page, as a user of a stock controller would.

The console has faults of its own that both controllers see alike: its dashboard asks for
``//terminators?filter=identity`` (400 on both; it falls back), a transit router's page asks for
``/transit-routers/{id}/services/`` and ``.../identities/`` (routes neither has), and the auth
policy form reads its data before it arrived (a TypeError in the browser console). Last, an
identity is created in the console's form, renamed in it and deleted from the list's row menu.
The test asserts that ziti-lite's walk shows nothing the real controller's does not, page by
page, that the walk reaches every page, and that the console's writes get the same answers.

Needs what ``test_zac45.py`` needs, and the ``ziti`` v2.0.3 binary for the real controller.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import ssl
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.conftest import start_quickstart
from tests.interop.test_zac45 import console, console_page, zac_dir  # noqa: F401 - the fixture

pytestmark = pytest.mark.interop

MGMT = "/edge/management/v1"
# asked by the console whatever the controller: the OIDC redirect target (read from the
# redirect, never served) and HA cluster members (a controller that is not a cluster has none)
EXPECTED = {("GET", "/auth/callback"), ("GET", "/fabric/v1/cluster/list-members"), ("GET", "/fabric/v1/raft/members")}
PAGES = ("dashboard", "attributes", "identities", "services", "configs", "config-types", "terminators", "routers",
         "transit-routers", "service-policies", "router-policies", "service-router-policies", "posture-checks",
         "certificate-authorities", "jwt-signers", "auth-policies", "sessions", "api-sessions", "profile",
         "settings", "network-visualizer")
INTERCEPT = {"protocols": ["tcp"], "addresses": ["walk.ziti"], "portRanges": [{"low": 80, "high": 80}]}
POLICY = {"cert": {"allowed": True, "allowExpiredCerts": False}, "extJwt": {"allowed": False, "allowedSigners": []},
          "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 3, "minPasswordLength": 5,
                   "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False}}


def seed(url: str, user: str, password: str) -> dict[str, str]:
    """One of each entity the console shows, through the management API: console page -> id."""
    tls = ssl._create_unverified_context()  # noqa: S323 - loopback, each controller's own fresh PKI

    def call(path: str, body: dict, token: str | None = None) -> dict:
        req = urllib.request.Request(url + MGMT + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", **({"zt-session": token}
                                                                                      if token else {})})
        with urllib.request.urlopen(req, context=tls, timeout=30) as r:
            return json.loads(r.read())["data"]

    token = call("/authenticate?method=password", {"username": user, "password": password})["token"]
    ids: dict[str, str] = {}

    def make(page: str, collection: str, body: dict) -> str:
        ids[page] = call("/" + collection, body, token)["id"]
        return ids[page]

    make("identities", "identities", {"name": "walk-id", "type": "User", "isAdmin": False,
                                      "roleAttributes": ["walkers"], "enrollment": {"ott": True}})
    make("config-types", "config-types", {"name": "walk-ct", "schema": {"type": "object"}})
    cfg = make("configs", "configs", {"name": "walk-cfg", "configTypeId": "g7cIWbcGg", "data": INTERCEPT})
    make("services/advanced", "services", {"name": "walk-svc", "encryptionRequired": True,
                                           "roleAttributes": ["walk"], "configs": [cfg]})
    make("service-policies", "service-policies", {"name": "walk-sp", "type": "Dial", "semantic": "AnyOf",
                                                  "identityRoles": ["#walkers"], "serviceRoles": ["#walk"]})
    make("router-policies", "edge-router-policies", {"name": "walk-erp", "semantic": "AnyOf",
                                                     "identityRoles": ["#walkers"], "edgeRouterRoles": ["#all"]})
    make("service-router-policies", "service-edge-router-policies", {
        "name": "walk-serp", "semantic": "AnyOf", "serviceRoles": ["#walk"], "edgeRouterRoles": ["#all"]})
    make("posture-checks", "posture-checks", {"name": "walk-pc", "typeId": "DOMAIN", "domains": ["corp"]})
    make("routers", "edge-routers", {"name": "walk-er", "roleAttributes": ["walk"]})
    make("transit-routers", "transit-routers", {"name": "walk-tr"})
    make("jwt-signers", "external-jwt-signers", {"name": "walk-jwt", "enabled": True, "audience": "walk",
                                                 "issuer": "https://walk.example",
                                                 "jwksEndpoint": "https://walk.example/jwks"})
    make("auth-policies", "auth-policies", {"name": "walk-ap", "primary": POLICY, "secondary": {"requireTotp": False}})
    return ids


def walk(zac: str, controller: str, user: str, password: str, ids: dict[str, str],
         name_controller: bool) -> dict[str, dict[str, list[str]]]:
    """Log in to the console at ``zac`` and open every page: page -> what went wrong there."""
    answers: list[tuple[str, str, int]] = []
    errors: list[str] = []
    out: dict[str, dict[str, list[str]]] = {}
    pages = [*PAGES, *(f"{page}/{id}" for page, id in ids.items())]
    with console_page(answers) as page:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        login(page, zac, controller, user, password, name_controller)
        for name in pages:
            mark, emark = len(answers), len(errors)
            page.goto(zac + "/zac/" + name, wait_until="networkidle")
            page.wait_for_timeout(800)
            growl = page.evaluate("(() => { const g = document.querySelector('#Growler.open.error');"
                                  " return g ? g.innerText : ''; })()")
            out[_generic(name, ids)] = {
                "reached": [] if page.url.endswith("/zac/" + name) else [page.url],
                "answers": sorted({f"{m} {_generic(path, ids)} {st}" for m, path, st in answers[mark:]
                                   if st >= 400 and (m, path) not in EXPECTED}),
                "growl": [growl.strip()] if growl.strip() else [],
                "console": sorted({_first_line(e) for e in errors[emark:] if _counts(e)}),
            }
        out["identities: create, rename, delete through the console"] = _identity_by_hand(page, zac, answers)
    return out


def login(page, zac: str, controller: str, user: str, password: str, name_controller: bool) -> None:
    """The admin logs in to the console at ``zac`` (by OIDC), to the dashboard."""
    page.goto(zac + "/zac/login", wait_until="networkidle")
    if name_controller:   # a console served apart from the controller asks which one
        page.locator("#schema__edgecontrollername").press_sequentially("walk")
        page.locator("#schema__url").press_sequentially(controller)
        page.keyboard.press("Tab")
        page.click("text=SET CONTROLLER")
        page.wait_for_selector("#Username", timeout=20_000)
    page.fill("#Username", user)
    page.fill("#Password", password)
    page.click("button.login-button")
    page.wait_for_url("**/zac/dashboard", timeout=30_000)


def _identity_by_hand(page, zac: str, answers: list[tuple[str, str, int]]) -> dict[str, list[str]]:
    """An identity created in the console's form, renamed in it, deleted from the list's row
    menu: the controller's answers to what the console sent (every write and its status)."""
    mark = len(answers)
    name_field = "input[placeholder='Name this identity']"
    page.goto(zac + "/zac/identities", wait_until="networkidle")
    page.click("[data-action=add]")
    page.fill(name_field, "walk-by-hand")
    page.locator(name_field).press("Enter")        # the form saves on Enter
    page.wait_for_selector("text=walk-by-hand", timeout=15_000)
    made = [path for m, path, st in answers[mark:] if m == "POST" and path == MGMT + "/identities" and st == 201]
    with contextlib.suppress(Exception):   # the list's row menu may render after the name (a loaded machine)
        page.wait_for_selector("[name='RowDots_walk-by-hand']", state="attached", timeout=15_000)
    id = page.evaluate("(name) => [...document.querySelectorAll('[id^=RowDots_]')].find("
                       "e => e.getAttribute('name') === 'RowDots_' + name)?.id.slice(8)", "walk-by-hand")
    if made and id:
        page.goto(zac + "/zac/identities/" + id, wait_until="networkidle")
        page.fill(name_field, "walk-renamed")
        page.locator(name_field).press("Enter")
        page.wait_for_selector("text=walk-renamed", timeout=15_000)
        page.click(f"[id=\"RowDots_{id}\"]")   # upstream ids may hold a dot
        page.get_by_text("Delete", exact=True).last.click()
        page.click("button.confirm")
        page.wait_for_timeout(2000)
    writes = [f"{m} {re.sub(r'/identities/[^/]+', '/identities/{id}', path)} {st}" for m, path, st in answers[mark:]
              if m in ("POST", "PUT", "PATCH", "DELETE") and path.startswith(MGMT)]
    return {"reached": [] if id else ["no row for the identity made"], "answers": writes, "growl": [], "console": []}


def _generic(text: str, ids: dict[str, str]) -> str:
    """A page or path with the walk's ids as {id}: the two controllers' pages side by side."""
    for id in ids.values():
        text = text.replace(id, "{id}")
    return text


def _counts(error: str) -> bool:
    # the console's fonts and the like come from the internet, which a test never reaches
    return "ERR_NAME_NOT_RESOLVED" not in error and "Failed to load resource" not in error


def _first_line(error: str) -> str:
    return re.sub(r"https?://127\.0\.0\.1:\d+", "", error.splitlines()[0])


@pytest.fixture
def static_zac() -> Iterator[str]:
    """The console's build served over loopback HTTP at /zac/ (its routes fall back to
    index.html); the OIDC redirect lands here too, so answers carry CORS headers as the
    console's own server would."""
    root = zac_dir().resolve()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def end_headers(self) -> None:
            self.send_header("Access-Control-Allow-Origin", "*")
            super().end_headers()

        def translate_path(self, path: str) -> str:
            rel = urllib.parse.unquote(path.split("?", 1)[0]).removeprefix("/zac").lstrip("/")
            full = (root / rel).resolve()
            inside = full == root or root in full.parents
            return str(full if inside and full.is_file() else root / "index.html")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_every_console_page_fares_on_ziti_lite_as_on_openziti_2(console, ziti2, static_zac, tmp_path):  # noqa: F811
    up = start_quickstart(ziti2, tmp_path / "openziti", "v2.0.3")
    try:
        theirs = walk(static_zac, up.url, up.admin_user, up.admin_password,
                      seed(up.url, up.admin_user, up.admin_password), name_controller=True)
    finally:
        up.stop()
    ours = walk(console.url, console.url, console.admin_user, console.admin_password,
                seed(console.url, console.admin_user, console.admin_password), name_controller=False)
    assert set(ours) == set(theirs) and len(ours) == len(PAGES) + 13, sorted(set(ours) ^ set(theirs))
    by_hand = "identities: create, rename, delete through the console"
    assert ours[by_hand] == theirs[by_hand], (ours[by_hand], theirs[by_hand])
    assert ours[by_hand]["answers"] == [f"POST {MGMT}/identities 201", f"PATCH {MGMT}/identities/{{id}} 200",
                                        f"DELETE {MGMT}/identities/{{id}} 200"], ours[by_hand]
    worse = {}
    for page, problems in ours.items():
        extra = {kind: sorted(set(found) - set(theirs[page][kind])) for kind, found in problems.items()}
        extra = {kind: found for kind, found in extra.items() if found}
        if extra:
            worse[page] = extra
    report = json.dumps({"ziti-lite": ours, "v2.0.3": theirs}, indent=1)
    Path(tmp_path / "walk.json").write_text(report)
    for side, pages in (("ziti-lite", ours), ("v2.0.3", theirs)):
        print(side, {page: [x for found in problems.values() for x in found]
                     for page, problems in pages.items() if any(problems.values())})
    assert not worse, f"pages that fare worse on ziti-lite than on OpenZiti v2.0.3: {json.dumps(worse, indent=1)}"
    # the walk saw each controller's pages, not a login page: the real one reached them all too
    assert not [p for p, found in theirs.items() if found["reached"]], theirs
