"""A throwaway OpenZiti controller for other projects' tests: a pytest plugin.

Installed with ziti-lite and registered through the ``pytest11`` entry point, so a project that
has ziti-lite in its test environment gets these fixtures without any import:

``ziti_lite``        (session) a real ``ziti-lite serve`` on free loopback ports, shared by the
                     session's tests: a :class:`Controller` (``url``, ``admin_user``,
                     ``admin_password``, ``ca_file``/``ca_pem``, ``edge_port``, ``client``)
``ziti_lite_clean``  (function) the same, but a new controller with a fresh network for each test
``ziti_lite_template`` (session) the database both start from: made once per session (the PKI
                     is the slow part), copied for every controller

``Controller.client`` is a small management-API client (:class:`Management`, standard library
only), logged in as the admin; ``Controller.delegate(name, permissions)`` is one logged in as a
new least-privilege identity (OpenZiti 2.0's permissions, e.g. ``["admin_readonly"]`` or
``["service", "config"]``): ``get/post/put/patch/delete`` return a :class:`Reply`; ``create`` returns the new id;
``create_identity`` makes an identity with a one-time-token enrollment and ``enroll`` turns it
into an identity file the OpenZiti SDKs load (``{"ztAPI": ..., "id": {"key", "cert", "ca"}}``).

Outside pytest, ``start(db)`` runs a controller until ``stop()``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import pytest
except ImportError:      # start(), Management and the rest work without pytest
    pytest = None        # type: ignore[assignment]

START_TIMEOUT = 30.0   # seconds a controller may take to answer /version (a slow CI machine)
ADMIN_USER = "admin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_template(path: str | os.PathLike, admin_user: str = ADMIN_USER, admin_password: str | None = None) -> str:
    """Create a controller database at ``path`` (PKI, default admin, built-in rows) without
    serving it. Returns the admin password."""
    from .app import create_app
    from .config import Settings
    password = admin_password or "Zl-" + secrets.token_urlsafe(12)
    app = create_app(Settings(db=str(path), admin_user=admin_user, admin_password=password))
    app.state.controller.store.close()   # closing checkpoints the WAL: the file alone is the database
    return password


def ca_bundle(db: str | os.PathLike) -> str:
    """The controller's CA certificates (signing CA, root) as PEM, read from its database."""
    from .db.store import Store
    store = Store(str(db))
    try:
        return "".join(
            store.value("SELECT value FROM controller WHERE key = ?", (k,)) for k in ("signer_cert", "root_cert")
        )
    finally:
        store.close()


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def data(self) -> Any:
        return self.body.get("data") if isinstance(self.body, dict) else None


class ZitiLiteError(AssertionError):
    pass


class Management:
    """A minimal client of the management API (``/edge/management/v1``), logged in (as the admin,
    or as a :meth:`Controller.delegate`) on first use and again when its session has gone."""

    def __init__(self, url: str, ca_file: str, username: str, password: str, tmp: str | None = None):
        self.url, self.username, self.password = url, username, password
        self.api = url + "/edge/management/v1"
        self.ca_file = ca_file
        self.tmp = tmp or tempfile.mkdtemp(prefix="ziti-lite-ids-")
        self.tls = ssl.create_default_context(cafile=ca_file)
        self.token: str | None = None

    def _call(
        self, method: str, url: str, body: Any = None, headers: dict | None = None, raw: bytes | None = None
    ) -> Reply:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {
            "accept": "application/json",
            **({"content-type": "application/json"} if body is not None else {}),
            **(headers or {}),
        }
        url = urllib.parse.quote(url, safe="/?=&:,;@!$'()*+[]~%#-._")  # a filter's spaces and quotes
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, context=self.tls, timeout=30) as r:
                status, text, hdrs = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            status, text, hdrs = e.code, e.read(), dict(e.headers)
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text.decode(errors="replace")
        return Reply(status, parsed, {k.lower(): v for k, v in hdrs.items()})

    def login(self) -> str:
        r = self._call(
            "POST", self.api + "/authenticate?method=password", {"username": self.username, "password": self.password}
        )
        if r.status != 200:
            raise ZitiLiteError(f"login of {self.username} failed: {r.status} {r.body}")
        self.token = r.data["token"]
        return self.token

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        for attempt in (0, 1):
            token = self.token or self.login()
            r = self._call(method, self.api + path, body, {"zt-session": token})
            if r.status != 401 or attempt:
                return r
            self.token = None
        return r

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Reply:
        return self.request("POST", path, body if body is not None else {})

    def put(self, path: str, body: Any) -> Reply:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any) -> Reply:
        return self.request("PATCH", path, body)

    def delete(self, path: str) -> Reply:
        return self.request("DELETE", path)

    def create(self, collection: str, body: dict) -> str:
        """POST to a collection; the new entity's id (raises unless 201)."""
        r = self.post(f"/{collection.strip('/')}", body)
        if r.status != 201:
            raise ZitiLiteError(f"create {collection} failed: {r.status} {r.body}")
        return r.data["id"]

    def create_identity(
        self, name: str, roles: tuple[str, ...] | list[str] = (), admin: bool = False, **fields: Any
    ) -> str:
        """An identity with a one-time-token enrollment; its id."""
        return self.create(
            "identities",
            {
                "name": name,
                "type": "Device",
                "isAdmin": admin,
                "roleAttributes": list(roles),
                "enrollment": {"ott": True},
                **fields,
            },
        )

    def enroll(self, identity_id: str, path: str | os.PathLike | None = None) -> str:
        """Enroll an identity's one-time token with a new key (EC P-256) and write the identity
        file the SDKs load; returns its path (default: ``<tmp>/<identity name>.json``)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        r = self.get(f"/identities/{identity_id}")
        if r.status != 200:
            raise ZitiLiteError(f"no identity {identity_id}: {r.status}")
        ott = (r.data.get("enrollment") or {}).get("ott") or {}
        if not ott.get("token"):
            raise ZitiLiteError(f"identity {identity_id} has no one-time-token enrollment")
        key = ec.generate_private_key(ec.SECP256R1())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        csr = (
            x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, identity_id)]))
            .sign(key, hashes.SHA256())
            .public_bytes(serialization.Encoding.PEM)
        )
        e = self._call(
            "POST",
            f"{self.url}/edge/client/v1/enroll?method=ott&token={ott['token']}",
            headers={"content-type": "application/x-pem-file", "accept": "application/json"},
            raw=csr,
        )
        if e.status != 200:
            raise ZitiLiteError(f"enrollment of {identity_id} failed: {e.status} {e.body}")
        out = Path(path) if path is not None else Path(self.tmp) / f"{r.data['name']}.json"
        out.write_text(
            json.dumps(
                {
                    "ztAPI": self.url,
                    "ztAPIs": [self.url],
                    "configTypes": None,
                    "id": {"key": "pem:" + key_pem, "cert": "pem:" + e.data["cert"], "ca": "pem:" + e.data["ca"]},
                },
                indent=2,
            )
        )
        return str(out)


@dataclass
class Controller:
    """A running ``ziti-lite serve``."""

    url: str
    port: int
    edge_port: int
    db: str
    admin_user: str
    admin_password: str
    ca_pem: str
    ca_file: str
    proc: subprocess.Popen
    tmp: str
    ctrl_port: int = 0               # the control channel for real routers (start(ctrl=True))
    lines: list[str] = field(default_factory=list)
    _client: Management | None = None

    @property
    def client(self) -> Management:
        if self._client is None:
            self._client = Management(self.url, self.ca_file, self.admin_user, self.admin_password, self.tmp)
        return self._client

    def delegate(self, name: str, permissions: list[str] | tuple[str, ...] = ("admin_readonly",),
                 password: str | None = None) -> Management:
        """A management client logged in as a new identity that is no admin and holds
        ``permissions`` (OpenZiti 2.0's: ``admin_readonly``, ``service``, ``identity.create``, ...),
        made by the admin: to test that code needs no more than that. A refused operation
        answers 401 ``UNAUTHORIZED``."""
        password = password or secrets.token_urlsafe(18)
        ident = self.client.create("identities", {"name": name, "type": "User", "isAdmin": False,
                                                  "permissions": list(permissions)})
        self.client.create("authenticators", {"method": "updb", "identityId": ident, "username": name,
                                              "password": password})
        return Management(self.url, self.ca_file, name, password, self.tmp)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self, wait: bool = True) -> int | None:
        """SIGTERM (an orderly shutdown); with ``wait=False`` the process is reaped in the
        background and the call returns at once."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if not wait:
                threading.Thread(target=self._reap, daemon=True).start()
                return None
            self._reap()
        return self.proc.returncode

    def _reap(self) -> None:
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def start(
    db: str | os.PathLike,
    admin_password: str,
    admin_user: str = ADMIN_USER,
    edge: bool = True,
    extra: tuple[str, ...] = (),
    ctrl: bool = False,
    env: dict[str, str] | None = None,
    port: int | None = None,
    ctrl_port: int | None = None,
) -> Controller:
    """Start ``ziti-lite serve`` on ``db`` (an existing controller database, e.g. a copy of a
    template) on free loopback ports and wait until it answers. ``admin_user``/``admin_password``
    are the credentials the database's admin already has (for ``Controller.client``); ``extra``
    are more ``serve`` options, ``env`` more environment (inherited ZITI_LITE_* are dropped);
    ``ctrl`` opens the control channel for real routers on a free port too. ``port`` and
    ``ctrl_port`` fix those ports instead (to start a controller again where it was)."""
    db = str(db)
    ca = ca_bundle(db)
    tmp = tempfile.mkdtemp(prefix="ziti-lite-")
    ca_file = os.path.join(tmp, "ca.pem")
    Path(ca_file).write_text(ca)
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ZITI_LITE_")},
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    for attempt in range(3):  # a free port may be taken before the server binds it: try others
        api_port = port or free_port()
        edge_port = free_port() if edge else 0
        router_port = ctrl_port or (free_port() if ctrl else 0)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ziti_lite",
                "serve",
                "--db",
                db,
                "--host",
                "127.0.0.1",
                "--port",
                str(api_port),
                "--edge-port",
                str(edge_port),  # no admin options: they only apply to a new file
                "--ctrl-port",
                str(router_port),
                "--log-level",
                "warning",
                *extra,
            ],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ctl = Controller(
            f"https://127.0.0.1:{api_port}", api_port, edge_port, db, admin_user, admin_password, ca, ca_file, proc,
            tmp, router_port,
        )
        threading.Thread(target=_collect_output, args=(ctl,), daemon=True).start()
        if _wait_ready(ctl):
            return ctl
        ctl.stop()
        if "address already in use" not in ctl.output.lower():
            break
    raise ZitiLiteError(f"ziti-lite did not start:\n{ctl.output}")


def _collect_output(ctl: Controller) -> None:
    """Keep the server's output lines until it exits, then close the pipe."""
    out = ctl.proc.stdout
    assert out is not None   # started with stdout=PIPE
    with out:
        ctl.lines.extend(out)


def _wait_ready(ctl: Controller) -> bool:
    tls = ssl.create_default_context(cafile=ctl.ca_file)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and ctl.proc.poll() is None:
        try:
            with urllib.request.urlopen(ctl.url + "/version", context=tls, timeout=2) as r:
                if r.status == 200:
                    return True
        except (OSError, urllib.error.URLError):
            time.sleep(0.02)
    return False


# ---------------------------------------------------------------- pytest fixtures
@dataclass
class Template:
    path: str
    admin_user: str
    admin_password: str

    def copy(self, dest: str | os.PathLike) -> str:
        shutil.copyfile(self.path, dest)
        return str(dest)


class Spares:
    """Fresh controllers on demand, one always starting in the background: a test that takes
    one gets the controller started while the previous test ran, so a clean network per test
    costs about a copy of the template rather than a process start."""

    def __init__(self, template: Template, directory: Path):
        self.template, self.directory = template, directory
        self._count = 0
        self._next: threading.Thread | None = None
        self._result: list = []
        self.closed = False

    def _start(self) -> None:
        self._count += 1
        db = self.template.copy(self.directory / f"net-{self._count}.db")
        result: list = []
        self._result = result

        def run():
            try:
                result.append(start(db, self.template.admin_password, self.template.admin_user))
            except BaseException as e:  # handed to the test that takes this spare
                result.append(e)

        self._next = threading.Thread(target=run, daemon=True)
        self._next.start()

    def take(self) -> Controller:
        if self._next is None:
            self._start()
        assert self._next is not None
        self._next.join()
        result = self._result[0]
        self._start()  # the next test's controller starts while this one runs
        if isinstance(result, BaseException):
            raise result
        return result

    def close(self) -> None:
        if self._next is not None:
            self._next.join()
            if self._result and isinstance(self._result[0], Controller):
                self._result[0].stop()
                shutil.rmtree(self._result[0].tmp, ignore_errors=True)


if pytest is not None:

    @pytest.fixture(scope="session")
    def ziti_lite_template(tmp_path_factory) -> Template:
        path = tmp_path_factory.mktemp("ziti-lite-template") / "template.db"
        return Template(str(path), ADMIN_USER, make_template(path, ADMIN_USER))

    @pytest.fixture(scope="session")
    def ziti_lite(ziti_lite_template, tmp_path_factory):
        """One controller for the whole session."""
        directory = tmp_path_factory.mktemp("ziti-lite")
        ctl = start(
            ziti_lite_template.copy(directory / "net.db"),
            ziti_lite_template.admin_password,
            ziti_lite_template.admin_user,
        )
        try:
            yield ctl
        finally:
            ctl.stop()
            shutil.rmtree(ctl.tmp, ignore_errors=True)

    @pytest.fixture(scope="session")
    def _ziti_lite_spares(ziti_lite_template, tmp_path_factory):
        spares = Spares(ziti_lite_template, tmp_path_factory.mktemp("ziti-lite-clean"))
        yield spares
        spares.close()

    @pytest.fixture
    def ziti_lite_clean(_ziti_lite_spares):
        """A controller with a fresh network, for this test only (stopped after it)."""
        ctl = _ziti_lite_spares.take()
        try:
            yield ctl
        finally:
            ctl.stop(wait=False)  # a throwaway: its database is not looked at again
