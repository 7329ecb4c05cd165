"""A lab of ziti-lite plus one real OpenZiti router (``ziti router`` v2.0, v1.6 or v1.3), on this machine:

* ``ziti-lite serve`` with its control channel (no embedded router: the real one carries all);
* a tunneler-enabled router ``site-a``, created through the API, configured with
  ``ziti create config router edge``, enrolled with its JWT and run;
* a TCP echo server beside the router, offered as the service ``lab-echo`` through a ``host.v1``
  config that the router hosts itself (its Router identity binds it by policy);
* the identity ``lab-client`` (OpenZiti Python SDK, ``pip install openziti==0.6.0``), which dials
  ``lab-echo`` through the router and prints the echo.

    python examples/real_router_lab.py [--ziti PATH] [--keep DIR]

``--ziti`` (or ``$ZITI_CLI``) names the ``ziti`` binary of the router's line (v2.0.3, what
OpenZiti's download page gives today, v1.6.20 or v1.3.3); ``--keep DIR`` keeps the lab's files
there. Everything listens on 127.0.0.1 and stops when the script ends.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PASSWORD = "lab-Admin-Passw0rd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base: str):
        self.base, self.ctx = base, ssl.create_default_context()
        self.ctx.check_hostname, self.ctx.verify_mode = False, ssl.CERT_NONE   # lab only: our own CA
        self.token = self.call("POST", "/authenticate?method=password", {"username": "admin", "password": PASSWORD})[
            "data"]["token"]

    def call(self, method: str, path: str, body=None):
        req = urllib.request.Request(self.base + "/edge/management/v1" + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"content-type": "application/json",
                                              **({"zt-session": self.token} if getattr(self, "token", None) else {})})
        with urllib.request.urlopen(req, context=self.ctx) as r:
            return json.load(r)

    def create(self, collection: str, body: dict) -> str:
        return self.call("POST", f"/{collection}", body)["data"]["id"]


def echo_server() -> int:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"echo from beside site-a: " + conn.recv(4096))
    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ziti", default=os.environ.get("ZITI_CLI") or shutil.which("ziti"))
    ap.add_argument("--keep")
    a = ap.parse_args()
    if not a.ziti:
        sys.exit("real_router_lab: no ziti binary (give --ziti PATH or set ZITI_CLI)")
    lab = a.keep or tempfile.mkdtemp(prefix="ziti-lite-lab-")
    os.makedirs(lab, exist_ok=True)
    port, ctrl_port, router_port = free_port(), free_port(), free_port()
    procs: list[subprocess.Popen] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZITI_", "ZITI_LITE_"))}
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "ziti_lite", "serve", "--db", f"{lab}/lab.db",
                                       "--port", str(port), "--edge-port", "0", "--ctrl-port", str(ctrl_port),
                                       "--admin-password", PASSWORD], env=env, stdout=subprocess.DEVNULL))
        base = f"https://127.0.0.1:{port}"
        for _ in range(100):
            try:
                api = Api(base)
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("real_router_lab: ziti-lite did not start")
        print(f"ziti-lite: API {base}, control channel tls:127.0.0.1:{ctrl_port}")

        # the router: entity (tunneler-enabled), configuration, enrollment, run
        rid = api.create("edge-routers", {"name": "site-a", "roleAttributes": ["public"], "isTunnelerEnabled": True})
        # the service the router will host, and who may dial it (before the router starts: it
        # reads its services at start, then every 15 s)
        host_cfg = api.create("configs", {"name": "lab-echo-host", "configTypeId": "NH5p4FpGR",
                                          "data": {"protocol": "tcp", "address": "127.0.0.1", "port": echo_server()}})
        svc = api.create("services", {"name": "lab-echo", "configs": [host_cfg], "encryptionRequired": True})
        api.create("service-policies", {"name": "lab-echo-bind", "type": "Bind", "semantic": "AnyOf",
                                        "identityRoles": [f"@{rid}"], "serviceRoles": [f"@{svc}"]})
        client = api.create("identities", {"name": "lab-client", "type": "Device", "isAdmin": False,
                                           "enrollment": {"ott": True}})
        api.create("service-policies", {"name": "lab-echo-dial", "type": "Dial", "semantic": "AnyOf",
                                        "identityRoles": [f"@{client}"], "serviceRoles": [f"@{svc}"]})
        jwt = api.call("GET", f"/identities/{client}")["data"]["enrollment"]["ott"]["jwt"]

        with open(f"{lab}/site-a.jwt", "w") as f:
            f.write(api.call("GET", f"/edge-routers/{rid}")["data"]["enrollmentJwt"])
        router_env = {**env, "HOME": lab, "ZITI_CTRL_ADVERTISED_ADDRESS": "127.0.0.1",
                      "ZITI_CTRL_ADVERTISED_PORT": str(ctrl_port), "ZITI_ROUTER_ADVERTISED_ADDRESS": "127.0.0.1",
                      "ZITI_ROUTER_PORT": str(router_port)}
        subprocess.run([a.ziti, "create", "config", "router", "edge", "--routerName", "site-a", "--tunnelerMode",
                        "host", "--private", "-o", f"{lab}/site-a.yml"], env=router_env, cwd=lab, check=True,
                       capture_output=True)
        with open(f"{lab}/site-a.yml") as f:   # a lab on one machine: listen on loopback only
            config = re.sub(r"0\.0\.0\.0", "127.0.0.1", f.read())
        with open(f"{lab}/site-a.yml", "w") as f:
            f.write(config)
        subprocess.run([a.ziti, "router", "enroll", f"{lab}/site-a.yml", "--jwt", f"{lab}/site-a.jwt"], env=router_env,
                       cwd=lab, check=True, capture_output=True)
        procs.append(subprocess.Popen([a.ziti, "router", "run", f"{lab}/site-a.yml"], env=router_env, cwd=lab,
                                      stdout=open(f"{lab}/site-a.log", "wb"), stderr=subprocess.STDOUT))  # noqa: SIM115
        for _ in range(150):
            if api.call("GET", f"/edge-routers/{rid}")["data"]["isOnline"]:
                break
            time.sleep(0.1)
        else:
            sys.exit(f"real_router_lab: site-a did not come online (see {lab}/site-a.log)")
        print("site-a: online")

        import openziti  # the Python SDK: enroll, then dial through site-a
        from echo_client import dial  # (beside this file) the C SDK's connect, as openziti 0.6.0 needs
        identity = openziti.enroll(jwt)
        with open(f"{lab}/lab-client.json", "w") as f:
            f.write(identity)
        ztx = openziti.zitilib.load(f"{lab}/lab-client.json")
        for _ in range(60):   # until the router has bound the service (it polls its services)
            try:
                with dial(ztx, "lab-echo") as s:
                    s.sendall(b"hello through a real router\n")
                    print("lab-client got:", s.recv(4096).decode().strip())
                    return
            except OSError:
                time.sleep(0.5)
        sys.exit(f"real_router_lab: lab-echo was not reachable (see {lab}/site-a.log)")
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(20)
        if not a.keep:
            shutil.rmtree(lab, ignore_errors=True)


if __name__ == "__main__":
    main()
