"""What the interop tests share: the real ``ziti`` binaries, a real OpenZiti controller, SDK peers.

The ``ziti`` CLI and controller the tests compare with is v1.3.3 (the API ziti-lite serves): it
comes from ``$ZITI_CLI``, else the cache ``~/.cache/ziti-lite/ziti-cli-v1.3.3/ziti``
(``$ZITI_LITE_GO_CACHE/ziti-cli-v1.3.3`` when set), else ``go install`` of the released module
where the Go module proxy serves it. Real routers run once per supported router line present
(``router_bin``): v2.0.3 (``$ZITI_CLI_V2_0_3``), v1.6.20 (``$ZITI_CLI_V1_6_20``) and v1.3.3, each from
its variable or the cache folder ``ziti-cli-<version>``; a released binary put there does as
well. The tests that need a binary skip, saying why, where none is at hand.

``openziti`` runs ``ziti edge quickstart --no-router`` (the controller alone, its PKI and bbolt
file in a temporary directory, admin ``admin``/``admin``) bound to loopback through
``ZITI_CTRL_BIND_ADDRESS`` and ``ZITI_CTRL_EDGE_BIND_ADDRESS``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass

import pytest

from tests.edge.conftest import peers  # noqa: F401 - fixture (SDK peers)
from tests.edge.test_go_sdk import go, gopeer, gopeer_v1  # noqa: F401 - fixtures (the Go SDK peers)
from ziti_lite import testing

VERSION = "v1.3.3"
ROUTER_LINES = ("v2.0.3", "v1.6.20", "v1.3.3")    # the supported lines first, the retired one last


def _cache(version: str = VERSION) -> str:
    base = os.environ.get("ZITI_LITE_GO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ziti-lite")
    return os.path.join(base, f"ziti-cli-{version}")


def env_name(version: str) -> str:
    return "ZITI_CLI_" + version.upper().replace(".", "_")


def find_binary(version: str) -> str | None:
    """The ``ziti`` binary of one release line: its variable, else the cache; None when absent."""
    named = os.environ.get(env_name(version)) or (os.environ.get("ZITI_CLI") if version == VERSION else None)
    if named:
        return named
    path = os.path.join(_cache(version), "ziti")
    return path if os.path.exists(path) else None


@pytest.fixture(scope="module", params=ROUTER_LINES)
def router_bin(request, ziti_bin_lines) -> str:
    """The ``ziti`` binary whose routers a test runs, once per router line present."""
    version = request.param
    path = ziti_bin_lines.get(version)
    if path is None:
        pytest.skip(f"no ziti {version} binary (${env_name(version)} or {os.path.join(_cache(version), 'ziti')})")
    return path


@pytest.fixture(scope="session")
def ziti2() -> str:
    """The ``ziti`` binary of v2.0.3 (the CLI and controller of today), or the test skips."""
    path = find_binary("v2.0.3")
    if path is None:
        pytest.skip(f"no ziti v2.0.3 binary (${env_name('v2.0.3')} or {os.path.join(_cache('v2.0.3'), 'ziti')})")
    return path


@pytest.fixture(scope="session")
def ziti_bin_lines(request) -> dict[str, str]:
    """Every router line's binary at hand (v1.3.3 installed as ``ziti_bin`` installs it)."""
    out = {v: p for v in ROUTER_LINES if (p := find_binary(v)) is not None}
    if VERSION not in out:
        try:
            out[VERSION] = request.getfixturevalue("ziti_bin")
        except pytest.skip.Exception:
            pass
    return out


@pytest.fixture(scope="session")
def ziti_bin() -> str:
    found = find_binary(VERSION)
    if found is not None:
        return found
    path = os.path.join(_cache(), "ziti")
    go_cmd = shutil.which("go")
    if go_cmd is None:
        pytest.skip(f"no ziti {VERSION} binary ($ZITI_CLI or {path}) and no go command to install it")
    os.makedirs(_cache(), exist_ok=True)
    try:
        r = subprocess.run([go_cmd, "install", f"github.com/openziti/ziti/ziti@{VERSION}"], capture_output=True,
                           text=True, env={**os.environ, "GOTOOLCHAIN": "auto", "GOBIN": _cache()}, timeout=30 * 60)
    except subprocess.TimeoutExpired:
        pytest.skip("installing the ziti CLI took over 30 minutes")
    if r.returncode != 0 or not os.path.exists(path):
        pytest.skip(f"the ziti CLI {VERSION} could not be installed (put a released ziti {VERSION} binary at "
                    f"{path} or name it in $ZITI_CLI): {r.stderr.strip()[-800:]}")
    return path


@dataclass
class OpenZiti:
    url: str                      # https://127.0.0.1:PORT
    admin_user: str
    admin_password: str
    home: str


def _low_free_port() -> int:
    """A free loopback port below 32768 (the quickstart refuses higher ones)."""
    for _ in range(200):
        port = testing.free_port()
        if port < 32768:
            return port
    for port in range(20000, 32000, 7):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port below 32768")


def _ready(url: str) -> bool:
    ctx = ssl._create_unverified_context()  # noqa: S323 - loopback, the controller's own fresh PKI
    try:
        with urllib.request.urlopen(url + "/edge/management/v1/version", context=ctx, timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


@dataclass
class Quickstart(OpenZiti):
    proc: subprocess.Popen | None = None
    log: object = None

    def stop(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)  # the quickstart's own process group, started here
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.log is not None:
            self.log.close()  # type: ignore[attr-defined]


def start_quickstart(binary: str, home_dir, version: str = VERSION) -> Quickstart:
    """``ziti edge quickstart --no-router`` of ``binary`` on loopback (v2.0's is a one-node HA
    cluster); skips the test, with the quickstart's last words, when it does not come up."""
    home = str(home_dir)
    os.makedirs(home, exist_ok=True)
    port = _low_free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_")}, "HOME": home,
           "ZITI_CTRL_BIND_ADDRESS": "127.0.0.1", "ZITI_CTRL_EDGE_BIND_ADDRESS": "127.0.0.1"}
    log = open(os.path.join(home, "quickstart.log"), "wb")  # noqa: SIM115 - open while it runs
    proc = subprocess.Popen(
        [binary, "edge", "quickstart", "--no-router", "--home", os.path.join(home, "qs"),
         "--ctrl-address", "127.0.0.1", "--ctrl-port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while not _ready(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            log.close()
            text = open(os.path.join(home, "quickstart.log"), errors="replace").read()[-1500:]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            pytest.skip(f"the OpenZiti {version} quickstart did not start: {text}")
        time.sleep(0.5)
    # the quickstart finishes its own setup (v2.0: the cluster, then the default admin) after listening
    while not _admin_ready(url) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    time.sleep(1)
    return Quickstart(url, "admin", "admin", home, proc, log)


def _admin_ready(url: str) -> bool:
    ctx = ssl._create_unverified_context()  # noqa: S323 - loopback, the controller's own fresh PKI
    req = urllib.request.Request(url + "/edge/management/v1/authenticate?method=password", method="POST",
                                 data=b'{"username":"admin","password":"admin"}',
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            return r.status == 200
    except Exception:
        return False


@pytest.fixture(scope="module")
def openziti(ziti_bin, tmp_path_factory):
    qs = start_quickstart(ziti_bin, tmp_path_factory.mktemp("openziti"))
    yield qs
    qs.stop()
