"""The ``ziti`` CLI of today (OpenZiti v2.0.3) against ziti-lite, as a newcomer drives it:
``ziti edge login`` keeping an OIDC session, ``ziti login``, the reorganised top-level commands
(``ziti create|list|update|delete <entity>``) for identities, services, configs, the policies and
edge routers, ``ziti edge enroll``, and ``ziti tunnel`` reaching a service through a v2.0.3
router. The same create/list/update/delete script runs against the real v2.0.3 controller
(``ziti edge quickstart``) and each command's outcome is compared.

The binary is found as ``make interop`` finds each router line's (``$ZITI_CLI_V2_0_3`` or the
cache ``~/.cache/ziti-lite/ziti-cli-v2.0.3/ziti``); skipped, saying why, where none is at hand."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.edge.conftest import enroll, host, wait_for
from tests.enroll.conftest import running
from tests.interop.conftest import start_quickstart
from tests.interop.real_router import RealRouter, wait_online
from tests.interop.test_ziti_cli import ANSI
from ziti_lite import testing

pytestmark = pytest.mark.interop
V2 = "v2.0.3"


class Cli:
    def __init__(self, binary: str, home: Path):
        self.binary, self.home = binary, home
        home.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict:
        return {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_")}, "HOME": str(self.home),
                "NO_COLOR": "1"}

    def run(self, *args: str, ok: bool = True) -> tuple[int, str]:
        r = subprocess.run([self.binary, *args], capture_output=True, text=True, env=self.env(), timeout=120,
                           stdin=subprocess.DEVNULL)
        out = ANSI.sub("", r.stdout + r.stderr)
        if ok:
            assert r.returncode == 0, f"ziti {' '.join(args)} failed ({r.returncode}):\n{out}"
        return r.returncode, out

    def saved_session(self) -> dict:
        cfg = json.loads((self.home / ".config" / "ziti" / "ziti-cli.json").read_text())
        return cfg["edgeIdentities"]["default"]


# the script both controllers get: (command, what its output must show)
SCRIPT: list[tuple[tuple[str, ...], str]] = [
    (("create", "identity", "cli2-alice", "--role-attributes", "staff"), r"New identity cli2-alice created"),
    (("create", "service", "cli2-web", "--role-attributes", "web"), r"New service cli2-web created"),
    (("create", "config", "cli2-intercept", "intercept.v1",
      '{"protocols":["tcp"],"addresses":["web.ziti"],"portRanges":[{"low":80,"high":80}]}'),
     r"New config cli2-intercept created"),
    (("create", "service-policy", "cli2-dial", "Dial", "--identity-roles", "#staff", "--service-roles", "#web"),
     r"New service policy cli2-dial created"),
    (("create", "edge-router-policy", "cli2-erp", "--identity-roles", "#staff", "--edge-router-roles", "#all"),
     r"New edge router policy cli2-erp created"),
    (("create", "service-edge-router-policy", "cli2-serp", "--service-roles", "#web", "--edge-router-roles", "#all"),
     r"New service edge router policy cli2-serp created"),
    (("create", "edge-router", "cli2-er", "--role-attributes", "branch"), r"New edge router cli2-er created"),
    (("list", "identities", 'name="cli2-alice"'), r"cli2-alice .*staff"),
    (("list", "services", 'name="cli2-web"'), r"cli2-web"),
    (("list", "configs", 'name="cli2-intercept"'), r"cli2-intercept"),
    (("list", "service-policies", 'name="cli2-dial"'), r"cli2-dial"),
    (("list", "edge-routers", 'name="cli2-er"'), r"cli2-er"),
    (("update", "identity", "cli2-alice", "--role-attributes", "staff,ops"), r""),
    (("list", "identities", 'name="cli2-alice"'), r"ops,staff|staff,ops"),
    (("update", "service", "cli2-web", "--role-attributes", "web2"), r""),
    (("update", "edge-router", "cli2-er", "--role-attributes", "branch2"), r""),
    (("list", "edge-routers", 'name="cli2-er"'), r"branch2"),
    (("delete", "service-policy", "cli2-dial"), r"OK"),
    (("delete", "edge-router-policy", "cli2-erp"), r"OK"),
    (("delete", "service-edge-router-policy", "cli2-serp"), r"OK"),
    (("delete", "config", "cli2-intercept"), r"OK"),
    (("delete", "service", "cli2-web"), r"OK"),
    (("delete", "edge-router", "cli2-er"), r"OK"),
    (("delete", "identity", "cli2-alice"), r"OK"),
    (("list", "identities", 'name="cli2-alice"'), r"results: none"),
]


def outcomes(cli: Cli) -> list[tuple[int, bool]]:
    """Each scripted command's exit code and whether its output shows what it must."""
    out = []
    for args, shows in SCRIPT:
        rc, text = cli.run(*args, ok=False)
        out.append((rc, re.search(shows, text) is not None if shows else True))
    return out


def test_login_keeps_an_oidc_session_and_the_top_level_commands_answer_as_upstream(ziti2, template_db, tmp_path):
    ctl = testing.start(_copy(template_db, tmp_path / "cli2.db"), _admin_password())
    try:
        lite = Cli(ziti2, tmp_path / "home-lite")
        lite.run("edge", "login", ctl.url, "-u", "admin", "-p", _admin_password(), "-y")
        saved = lite.saved_session()
        assert saved["apiSession"]["type"] == "oidc" and saved["apiSession"]["oidcRefreshToken"]
        lite.run("login", ctl.url, "-u", "admin", "-p", _admin_password(), "-y")
        assert lite.saved_session()["apiSession"]["type"] == "oidc"
        ours = outcomes(lite)
        assert all(rc == 0 and shown for rc, shown in ours), list(zip([a for a, _ in SCRIPT], ours, strict=True))
    finally:
        ctl.stop()
    real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
    try:
        upstream = Cli(ziti2, tmp_path / "home-real")
        upstream.run("edge", "login", real.url, "-u", real.admin_user, "-p", real.admin_password, "-y")
        theirs = outcomes(upstream)
    finally:
        real.stop()
    differ = [(args, o, t) for (args, _), o, t in zip(SCRIPT, ours, theirs, strict=True) if o != t]
    assert not differ, differ


def test_enroll_and_tunnel_through_a_v2_router(ziti2, template_db, tmp_path_factory, peers):
    """``ziti edge enroll`` of a new identity's JWT, then ``ziti tunnel proxy`` with it: a local
    port whose connections dial the service through a v2.0.3 router to a C SDK host."""
    with running(template_db, tmp_path_factory.mktemp("cli2-tunnel"), edge=False, ctrl=True) as lab:
        admin = lab.admin()
        router = RealRouter(ziti2, Path(lab.tmp), "cli2-site", lab.ctl.ctrl_server.port, admin)
        router.enroll()
        router.start()
        proxy = None
        try:
            wait_online(admin, router.id, timeout=15)
            cli = Cli(ziti2, Path(lab.tmp) / "home")
            cli.run("edge", "login", lab.url, "-u", "admin", "-p", _admin_password(), "-y")
            cli.run("create", "service", "cli2-echo", "--role-attributes", "cli2")
            cli.run("create", "service-policy", "cli2-dial", "Dial", "--identity-roles", "#cli2-client",
                    "--service-roles", "#cli2")
            cli.run("create", "service-policy", "cli2-bind", "Bind", "--identity-roles", "#cli2-host",
                    "--service-roles", "#cli2")
            jwt_file, id_file = Path(lab.tmp) / "client.jwt", Path(lab.tmp) / "client.json"
            cli.run("create", "identity", "cli2-client", "--role-attributes", "cli2-client", "-o", str(jwt_file))
            cli.run("edge", "enroll", str(jwt_file), "-o", str(id_file))
            assert json.loads(id_file.read_text())["id"]["cert"].startswith("pem:")
            _, host_file = enroll(lab, admin, "cli2-host", ["cli2-host"])
            host(peers, host_file, "cli2-echo", "beside-the-router")
            port = testing.free_port()
            log = Path(lab.tmp) / "tunnel.log"
            with open(log, "wb") as err:
                proxy = subprocess.Popen([ziti2, "tunnel", "proxy", f"cli2-echo:{port}", "-i", str(id_file)],
                                         env=cli.env(), stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

            def echo() -> bytes:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                        s.sendall(b"through ziti tunnel\n")
                        return s.recv(1024)
                except OSError:
                    return b""
            got = wait_for(echo, timeout=30, interval=0.5)
            assert got == b"beside-the-router:through ziti tunnel\n", (got, log.read_text()[-2000:])
        finally:
            if proxy is not None:
                os.killpg(proxy.pid, 15)
                proxy.wait(10)
            router.stop()


def _admin_password() -> str:
    from tests.conftest import ADMIN_PASSWORD
    return ADMIN_PASSWORD


def _copy(src, dst: Path) -> Path:
    import shutil
    shutil.copy(src, dst)
    return dst


def revocation_outcomes(cli: Cli) -> list[tuple[int, bool]]:
    """``ziti edge create revocation identity|api-session|jti`` and ``ziti edge list revocations``:
    each command's exit code and whether its output shows what it must (the ids are the side's)."""
    _, made = cli.run("edge", "create", "identity", "cli2-revoked")
    found = re.search(r"created with id: (\S+)", made)
    assert found, made
    ident, jti, asid = found.group(1), str(uuid.uuid4()), str(uuid.uuid4())
    script: list[tuple[tuple[str, ...], str]] = [
        (("edge", "create", "revocation", "jti", jti), re.escape(jti)),
        (("edge", "create", "revocation", "api-session", asid), re.escape(asid)),
        (("edge", "create", "revocation", "identity", "--", ident), re.escape(ident)),   # ids may start with "-"
        (("edge", "create", "revocation", "jti", jti), re.escape(jti)),             # again: replaced
        (("edge", "create", "revocation", "jti", "not-a-uuid"), r"UUID"),
        (("edge", "create", "revocation", "identity", str(uuid.uuid4())), r"NOT_FOUND|not found"),
        (("edge", "list", "revocations", f'id="{jti}"'), re.escape(jti) + r".*JTI"),
        (("edge", "list", "revocations", 'type="API_SESSION"'), re.escape(asid) + r".*API_SESSION"),
        (("edge", "list", "revocations", f'type="IDENTITY" and id="{ident}"'), re.escape(ident) + r".*IDENTITY"),
        (("edge", "list", "revocations", 'type="NOPE"'), r"results: none"),
        (("edge", "list", "revocations", 'nope="x"'), r"INVALID_FILTER|unknown symbol"),
    ]
    out = []
    for args, shows in script:
        rc, text = cli.run(*args, ok=False)
        out.append((rc, re.search(shows, text) is not None))
    return out


def on_both(ziti2: str, template_db, tmp_path: Path, db_name: str, run: Callable[..., Any]) -> tuple[Any, Any]:
    """``run(cli, url, user, password)`` with the v2.0 CLI logged in to ziti-lite (a copy of the
    template in ``db_name``), then to the real v2.0.3 quickstart: (ziti-lite's, upstream's)."""
    ctl = testing.start(_copy(template_db, tmp_path / db_name), _admin_password())
    try:
        lite = Cli(ziti2, tmp_path / "home-lite")
        lite.run("edge", "login", ctl.url, "-u", "admin", "-p", _admin_password(), "-y")
        ours = run(lite, ctl.url, "admin", _admin_password())
    finally:
        ctl.stop()
    real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
    try:
        upstream = Cli(ziti2, tmp_path / "home-real")
        upstream.run("edge", "login", real.url, "-u", real.admin_user, "-p", real.admin_password, "-y")
        theirs = run(upstream, real.url, real.admin_user, real.admin_password)
    finally:
        real.stop()
    return ours, theirs


def test_revocation_commands_answer_as_upstream(ziti2, template_db, tmp_path):
    ours, theirs = on_both(ziti2, template_db, tmp_path, "cli2-rev.db", lambda cli, *_: revocation_outcomes(cli))
    assert ours == theirs, list(zip(ours, theirs, strict=True))
    assert ours[:4] == [(0, True)] * 4 and all(rc != 0 for rc, _ in ours[4:6]), ours


def revocation_effects(cli: Cli, url: str, password: str) -> list[int]:
    """What each revocation the CLI makes does to the OIDC token of its own ``ziti edge login``
    (the access token's status at the client API's /current-identity before and after), and to
    a legacy session of the same identity."""
    http = httpx.Client(base_url=url, verify=False, timeout=30)   # loopback, each controller's own PKI

    def token() -> tuple[str, dict]:
        cli.run("edge", "login", url, "-u", "admin", "-p", password, "-y")
        t = cli.saved_session()["apiSession"]["oidcAccessToken"]
        return t, jwt.decode(t, options={"verify_signature": False})

    def status(t: str) -> int:
        return http.get("/edge/client/v1/current-identity", headers={"authorization": f"Bearer {t}"}).status_code
    legacy = http.post("/edge/management/v1/authenticate?method=password",
                       json={"username": "admin", "password": password}).json()["data"]["token"]
    out = []
    for kind, claim in (("jti", "jti"), ("api-session", "z_asid"), ("identity", "sub")):
        t, claims = token()
        time.sleep(1.1)     # the identity's cut-off is a second after this token's
        out.append(status(t))
        cli.run("edge", "create", "revocation", kind, "--", claims[claim])   # an id may start with "-"
        out.append(status(t))
    out.append(http.get("/edge/management/v1/current-identity", headers={"zt-session": legacy}).status_code)
    time.sleep(1.1)
    t, _ = token()          # a login a second after the identity's revocation
    out.append(status(t))
    http.close()
    return out


def test_revocations_refuse_the_tokens_they_name_as_upstream(ziti2, template_db, tmp_path):
    ctl = testing.start(_copy(template_db, tmp_path / "cli2-rev-effect.db"), _admin_password())
    try:
        ours = revocation_effects(Cli(ziti2, tmp_path / "home-lite"), ctl.url, _admin_password())
    finally:
        ctl.stop()
    real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
    try:
        theirs = revocation_effects(Cli(ziti2, tmp_path / "home-real"), real.url, real.admin_password)
    finally:
        real.stop()
    assert ours == theirs == [200, 401, 200, 401, 200, 401, 200, 200], (ours, theirs)
