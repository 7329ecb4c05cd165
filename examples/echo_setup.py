"""Set up the echo demo on a running ziti-lite from ``examples/network.yaml`` (the service
``echo``, who may host and dial it, its configs and the policy tests) with ``ziti-lite apply``,
then enroll the two identities (``echo-host.json``, ``echo-client.json``) for the OpenZiti
Python SDK (``pip install openziti==0.6.0``). The default router policies of a new network
already let every identity use the embedded edge router for every service.

    python examples/echo_setup.py https://127.0.0.1:1280 admin PASSWORD
"""

import json
import os
import ssl
import subprocess
import sys
import urllib.request

import openziti

base, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
network = os.path.join(os.path.dirname(os.path.abspath(__file__)), "network.yaml")

# the network as code: prints the plan, checks the file's tests, applies (exit 0), or refuses (exit 1)
subprocess.run(["ziti-lite", "apply", "--controller", base, "--username", user, "--password", password, network],
               check=True)

insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE   # only for this setup: the SDK verifies the controller itself


def call(method, path, body=None, token=None):
    req = urllib.request.Request(
        base + "/edge/management/v1" + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"content-type": "application/json", **({"zt-session": token} if token else {})},
    )
    with urllib.request.urlopen(req, context=insecure) as r:
        return json.load(r)


token = call("POST", "/authenticate?method=password", {"username": user, "password": password})["data"]["token"]
for name in ("echo-host", "echo-client"):
    identity = call("GET", f'/identities?filter=name="{name}"'.replace(" ", "%20").replace('"', "%22"),
                    token=token)["data"][0]
    ott = (identity.get("enrollment") or {}).get("ott")
    if not ott:
        print(f"{name} is enrolled already (or has no one-time token): keeping {name}.json")
        continue
    with open(f"{name}.json", "w") as f:
        f.write(openziti.enroll(ott["jwt"]))  # the SDK checks the JWT's signature and sends its own CSR
    print(f"enrolled {name} -> {name}.json")
