"""A real ``ziti router`` (OpenZiti v1.3.3) under a ziti-lite controller, driven as an operator
would: the router entity created through the management API, its configuration written by
``ziti create config router edge`` from the variables that command reads, ``ziti router enroll``
with the JWT, ``ziti router run``. Every listener is bound to loopback on free ports."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from ziti_lite.testing import free_port


class RealRouter:
    def __init__(self, binary: str, home: Path, name: str, ctrl_port: int, admin, *, attrs=("public",),
                 tunneler: bool = False, private: bool = True):
        self.binary, self.name = binary, name
        self.dir = home / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.edge_port = free_port()
        self.ctrl_port = ctrl_port
        self.id = admin.create("edge-routers", {"name": name, "roleAttributes": list(attrs),
                                                "isTunnelerEnabled": tunneler})
        jwt = admin.get(f"/edge-routers/{self.id}").json()["data"]["enrollmentJwt"]
        (self.dir / "router.jwt").write_text(jwt)
        self.config = self.dir / "router.yml"
        env = {"ZITI_CTRL_ADVERTISED_ADDRESS": "127.0.0.1", "ZITI_CTRL_ADVERTISED_PORT": str(ctrl_port),
               "ZITI_ROUTER_PORT": str(self.edge_port), "ZITI_ROUTER_ADVERTISED_ADDRESS": "127.0.0.1",
               "ZITI_ROUTER_LISTENER_BIND_PORT": str(free_port())}
        args = ["create", "config", "router", "edge", "--routerName", name, "-o", str(self.config)]
        if private:
            args.append("--private")
        # a tunnel listener on a router the API did not make tunneler-enabled makes the router exit
        # ("tunneling not enabled"), with upstream's controller as with ziti-lite
        args += ["--tunnelerMode", "host" if tunneler else "none"]
        self.run(*args, env=env)
        # the generated configuration binds every listener to all interfaces: loopback only here
        self.config.write_text(re.sub(r"0\.0\.0\.0", "127.0.0.1", self.config.read_text()))
        self.proc: subprocess.Popen | None = None
        self.log = self.dir / "router.log"

    def run(self, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
        environment = {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_")}, "HOME": str(self.dir),
                       **(env or {})}
        r = subprocess.run([self.binary, *args], cwd=self.dir, env=environment, capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, f"ziti {' '.join(args)}: {r.stdout}{r.stderr}"
        return r

    def enroll(self, jwt: str | None = None) -> None:
        if jwt is not None:
            (self.dir / "router.jwt").write_text(jwt)
        self.run("router", "enroll", str(self.config), "--jwt", str(self.dir / "router.jwt"))

    def start(self) -> None:
        environment = {**{k: v for k, v in os.environ.items() if not k.startswith("ZITI_")}, "HOME": str(self.dir)}
        self.logfile = open(self.log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([self.binary, "router", "run", str(self.config)], cwd=self.dir, env=environment,
                                     stdout=self.logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            if sig != signal.SIGSTOP:
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(5)
        if sig not in (signal.SIGSTOP,) and getattr(self, "logfile", None) is not None:
            self.logfile.close()
            self.logfile = None

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def wait_online(admin, rid: str, online: bool = True, timeout: float = 15.0) -> float:
    """Seconds until the router's ``isOnline`` is ``online``; AssertionError after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if admin.get(f"/edge-routers/{rid}").json()["data"]["isOnline"] is online:
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"router {rid} not {'online' if online else 'offline'} within {timeout} s")
