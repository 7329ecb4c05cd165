"""Shared fixtures: a fresh controller per test (copied from a template made once per session,
so the PKI is generated once), a TestClient, and an admin-logged-in client (whose API session
comes with the template too: one Argon2id login per run, not one per test).

The app's WAL checkpointer thread (db/checkpoint.py) runs only in tests marked
``@pytest.mark.checkpointer``; the others leave checkpoints to SQLite, as the CLI does."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import apsw
import pytest

warnings.filterwarnings("ignore", message=".*httpx.*", category=DeprecationWarning)
from starlette.testclient import TestClient  # noqa: E402

from tests.fastclient import FastClient  # noqa: E402
from ziti_lite import clock  # noqa: E402
from ziti_lite.app import create_app  # noqa: E402
from ziti_lite.config import Settings  # noqa: E402

T = TypeVar("T")


def pytest_addoption(parser) -> None:
    parser.addoption("--loop", choices=("auto", "uvloop", "asyncio"), default=None,
                     help="event loop of the servers the tests start (ziti-lite serve --loop); "
                          "default: ZITI_LITE_LOOP, else auto (uvloop when installed)")


def pytest_configure(config) -> None:
    # servers in subprocesses read ZITI_LITE_LOOP as `serve` does; in-process ones (tests/enroll's
    # `running`) read it too. xdist workers get the option and the environment both.
    if config.getoption("--loop"):
        os.environ["ZITI_LITE_LOOP"] = config.getoption("--loop")


def pytest_report_header(config) -> str:
    return f"ziti-lite servers' event loop: {os.environ.get('ZITI_LITE_LOOP', 'auto')}"

ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-Passw0rd"
MGMT = "/edge/management/v1"
CLIENT = "/edge/client/v1"


@pytest.fixture(scope="session")
def template_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "template.db"
    app = create_app(Settings(db=str(path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    app.state.controller.store.close()
    # statistics once: otherwise the "PRAGMA optimize" apsw runs on every open and close analyses
    # each (empty) table again, ~20 ms of each test's setup
    conn = apsw.Connection(str(path))
    conn.execute("ANALYZE")
    conn.close()
    return path


@pytest.fixture(scope="session")
def admin_template(template_db) -> tuple[Path, str]:
    """The template plus one admin API session, made by a password login through the API as a
    test's would be: (database file, session token)."""
    path = template_db.with_name("admin-template.db")
    shutil.copy(template_db, path)
    app = create_app(Settings(db=str(path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    try:
        token = Api(TestClient(app)).login().token   # no lifespan: no checkpointer, no janitor
    finally:
        app.state.controller.store.close()
    assert token is not None
    return path, token


@pytest.fixture(scope="session")
def db_dir(tmp_path_factory):
    """Where the per-test databases live: in memory (/dev/shm) where there is one, where the
    fsyncs of each test's last checkpoint cost nothing; else the session's temporary directory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="ziti-lite-tests-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("db")


_db_numbers = itertools.count()


# derived templates, most specific first; each is (database file, ...) made once a session from
# the one before it, through the API, as the fixture that uses it would have done in each test
TEMPLATES = ("client_net_template", "bare_template", "admin_template")


@pytest.fixture
def db_path(request, template_db, db_dir):
    """A copy of the template; for tests that need more (the admin session, a network without
    the default policies, ...), of the most specific of the ``TEMPLATES`` their fixtures use,
    so that the others see no API session or entity they did not make."""
    path = db_dir / str(next(_db_numbers)) / "net.db"
    path.parent.mkdir()
    used = next((t for t in TEMPLATES if t in request.fixturenames), None)
    shutil.copy(request.getfixturevalue(used)[0] if used else template_db, path)
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)   # snapshots beside it too


@pytest.fixture
def app(request, db_path):
    clock.reset()
    checkpointer = request.node.get_closest_marker("checkpointer") is not None
    application = create_app(Settings(db=str(db_path), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD,
                                      checkpointer=checkpointer))
    yield application
    clock.reset()
    application.state.controller.store.close()


@pytest.fixture
def ctl(app):
    return app.state.controller


class Api:
    """A TestClient bound to one API prefix and (optionally) one session token."""

    def __init__(self, client: TestClient, prefix: str = MGMT, token: str | None = None):
        self.client, self.prefix, self.token = client, prefix, token

    def _h(self, headers):
        h = dict(headers or {})
        if self.token and "zt-session" not in h:
            h["zt-session"] = self.token
        return h

    def request(self, method, path, headers=None, **kw):
        return self.client.request(method, self.prefix + path, headers=self._h(headers), **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def login(self, username=ADMIN_USER, password=ADMIN_PASSWORD) -> Api:
        r = self.client.post(
            self.prefix + "/authenticate?method=password", json={"username": username, "password": password}
        )
        assert r.status_code == 200, r.text
        return Api(self.client, self.prefix, r.json()["data"]["token"])

    def as_prefix(self, prefix: str) -> Api:
        return Api(self.client, prefix, self.token)

    def create(self, collection: str, body: dict) -> str:
        r = self.post(f"/{collection}", json=body)
        assert r.status_code == 201, r.text
        return r.json()["data"]["id"]


@pytest.fixture
def client(app):
    with FastClient(app) as c:
        yield c


@pytest.fixture
def anon(client):
    return Api(client)


@pytest.fixture
def admin_token(admin_template, ctl) -> str:
    """The template's admin API session, made current: as if the admin had just logged in."""
    token = admin_template[1]
    now = clock.stamp()
    with ctl.store.write():
        ctl.store.execute("UPDATE api_sessions SET created_at = ?, updated_at = ?, last_activity_at = ?"
                          " WHERE token = ?", (now, now, now, token))
    return token


@pytest.fixture
def admin(client, admin_token):
    return Api(client, token=admin_token)


DEFAULT_POLICIES = (
    ("edge-router-policies", "all-endpoints-public-routers"),
    ("service-edge-router-policies", "all-routers-all-services"),
)


def delete_default_policies(api) -> None:
    """Remove the two router policies a new network starts with (as a user may), for tests
    that count policy links from an empty start."""
    for collection, name in DEFAULT_POLICIES:
        for p in api.get(f'/{collection}?filter=name="{name}"').json()["data"]:
            assert api.delete(f"/{collection}/{p['id']}").status_code == 200


def derive_template(template: tuple[Path, str], name: str, step: Callable[[Api], T]) -> tuple[Path, T]:
    """A copy of ``template`` (database file, admin token) named ``name``, changed by ``step``
    through the API: (the new file, what ``step`` returned). No lifespan, so no threads."""
    path, token = template
    made = path.with_name(name)
    shutil.copy(path, made)
    app = create_app(Settings(db=str(made), admin_user=ADMIN_USER, admin_password=ADMIN_PASSWORD))
    try:
        return made, step(Api(TestClient(app), token=token))
    finally:
        app.state.controller.store.close()


@pytest.fixture(scope="session")
def bare_template(admin_template) -> tuple[Path, str]:
    """The admin template without the default router policies: (database file, admin token)."""
    bare, _ = derive_template(admin_template, "bare-template.db", delete_default_policies)
    return bare, admin_template[1]


@pytest.fixture
def bare(bare_template, admin):
    """The admin API on a network without the default router policies (deleted in the template)."""
    return admin


def assert_error(r, status: int, code: str):
    """Every error is the OpenZiti envelope with the given status and code."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "meta"}, body
    assert body["meta"] == {"apiEnrollmentVersion": "0.0.1", "apiVersion": "0.0.1"}
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    assert body["error"]["requestId"]
    return body["error"]
