"""Set up the echo demo on a running ziti-lite: a service ``echo``, who may host and dial it,
and two enrolled identities (``echo-host.json``, ``echo-client.json``) for the OpenZiti Python
SDK (``pip install openziti==0.6.0``). The default router policies of a new network already
let every identity use the embedded edge router for every service.

    python examples/echo_setup.py https://127.0.0.1:1280 admin PASSWORD
"""

import json
import ssl
import sys
import urllib.request

import openziti

base, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
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
call("POST", "/services", {"name": "echo", "encryptionRequired": True, "roleAttributes": ["echo"]}, token)
call(
    "POST",
    "/service-policies",
    {
        "name": "echo-bind",
        "type": "Bind",
        "semantic": "AnyOf",
        "identityRoles": ["#echo-hosts"],
        "serviceRoles": ["#echo"],
    },
    token,
)
call(
    "POST",
    "/service-policies",
    {
        "name": "echo-dial",
        "type": "Dial",
        "semantic": "AnyOf",
        "identityRoles": ["#echo-clients"],
        "serviceRoles": ["#echo"],
    },
    token,
)
for name, role in (("echo-host", "echo-hosts"), ("echo-client", "echo-clients")):
    iid = call(
        "POST",
        "/identities",
        {"name": name, "type": "Device", "isAdmin": False, "roleAttributes": [role], "enrollment": {"ott": True}},
        token,
    )["data"]["id"]
    jwt = call("GET", f"/identities/{iid}", token=token)["data"]["enrollment"]["ott"]["jwt"]
    with open(f"{name}.json", "w") as f:
        f.write(openziti.enroll(jwt))  # the SDK checks the JWT's signature and sends its own CSR
    print(f"enrolled {name} -> {name}.json")
