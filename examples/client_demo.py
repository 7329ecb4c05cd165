"""List services as an admin through the management API, using only the standard library.

    python examples/client_demo.py https://127.0.0.1:1280 admin PASSWORD
"""

import json
import ssl
import sys
import urllib.request

base, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE  # a demo: fetch /.well-known/est/cacerts to verify properly


def call(method, path, body=None, token=None):
    req = urllib.request.Request(
        base + "/edge/management/v1" + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"content-type": "application/json", **({"zt-session": token} if token else {})},
    )
    with urllib.request.urlopen(req, context=ctx) as r:
        return json.load(r)


token = call("POST", "/authenticate?method=password", {"username": user, "password": password})["data"]["token"]
for svc in call("GET", "/services?limit=100", token=token)["data"]:
    print(svc["id"], svc["name"], svc["roleAttributes"])
