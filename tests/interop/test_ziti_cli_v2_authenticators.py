"""``ziti edge update authenticator cert <id> --request-extend | --request-key-roll | --re-enroll``
of the ``ziti`` CLI v2.0.3 against ziti-lite and against the real v2.0.3 controller (``ziti edge
quickstart``): the same script (a certificate identity enrolled with ``ziti edge enroll``, its
authenticator flagged, key roll, re-enrollment, a password authenticator and an unknown id
refused, the CLI's own refusal of both flags at once) gives the same exit codes and the same
authenticator fields on both.

The binary is found as ``make interop`` finds it (``$ZITI_CLI_V2_0_3`` or the cache); skipped,
saying why, where none is at hand."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.interop.test_ziti_cli_v2 import Cli, on_both

pytestmark = pytest.mark.interop
FLAGS = ("isExtendRequested", "isKeyRollRequested", "extendRequestedAt", "lastAuthResolvedToRoot", "isIssuedByNetwork")


class Rest:
    """The management API with an admin session (the controllers' own fresh PKI, on loopback)."""

    def __init__(self, url: str, user: str, password: str):
        self.client = httpx.Client(base_url=url + "/edge/management/v1", verify=False, timeout=30)  # noqa: S501
        r = self.client.post("/authenticate?method=password", json={"username": user, "password": password})
        assert r.status_code == 200, r.text
        self.client.headers["zt-session"] = r.json()["data"]["token"]

    def close(self) -> None:
        self.client.close()

    def authenticator(self, identity_name: str, method: str) -> dict | None:
        r = self.client.get("/identities", params={"filter": f'name="{identity_name}"'})
        (ident,) = r.json()["data"]
        found = self.client.get("/authenticators", params={"filter": f'identity="{ident["id"]}" and method="{method}"'})
        rows = found.json()["data"]
        return rows[0] if rows else None


def _flags(auth: dict | None) -> dict:
    """The extension fields of an authenticator: values, but only presence for the time."""
    if auth is None:
        return {"gone": True}
    return {k: (True if k == "extendRequestedAt" else auth[k]) for k in FLAGS if k in auth}


def script(cli: Cli, rest: Rest, admin_name: str, tmp: Path) -> list[tuple]:
    """The steps, each as (what, exit code == 0, what the API shows after it)."""
    tmp.mkdir(parents=True, exist_ok=True)
    jwt_file, id_file = tmp / "x.jwt", tmp / "x.json"
    cli.run("create", "identity", "cli2-extend", "-o", str(jwt_file))
    cli.run("edge", "enroll", str(jwt_file), "-o", str(id_file))
    auth = rest.authenticator("cli2-extend", "cert")
    assert auth is not None
    updb = rest.authenticator(admin_name, "updb")
    assert updb is not None
    out: list[tuple] = [("enrolled", True, _flags(auth))]
    steps = [
        ("request-extend", (auth["id"], "--request-extend")),
        ("request-key-roll", (auth["id"], "--request-key-roll")),
        ("both flags", (auth["id"], "--request-extend", "--re-enroll")),
        ("password authenticator", (updb["id"], "--request-extend")),
        ("unknown id", ("no-such-authenticator", "--request-extend")),
        ("re-enroll", (auth["id"], "--re-enroll", "--duration", "10m")),
    ]
    for what, args in steps:
        rc, text = cli.run("edge", "update", "authenticator", "cert", *args, ok=False)
        shown = "token:" in text if what == "re-enroll" else None
        out.append((what, rc == 0, shown, _flags(rest.authenticator("cli2-extend", "cert"))))
    r = rest.client.get("/identities", params={"filter": 'name="cli2-extend"'})
    out.append(("enrollment after re-enroll", sorted((r.json()["data"][0].get("enrollment") or {}).keys())))
    # the refusals on the wire: status, code and cause
    for what, id in (("password authenticator", updb["id"]), ("unknown id", "no-such-authenticator")):
        r = rest.client.post(f"/authenticators/{id}/request-extend", json={"rollKeys": False})
        error = r.json()["error"]
        out.append((what, r.status_code, error["code"], (error.get("cause") or {}).get("message")))
    return out


def test_update_authenticator_cert_answers_as_upstream(ziti2, template_db, tmp_path):
    scratch = iter((tmp_path / "lite", tmp_path / "real"))   # ziti-lite's run, then upstream's

    def run(cli: Cli, url: str, user: str, password: str) -> list:
        rest = Rest(url, user, password)
        try:
            return script(cli, rest, _admin_name(rest), next(scratch))
        finally:
            rest.close()
    ours, theirs = on_both(ziti2, template_db, tmp_path, "cli2-auth.db", run)
    assert ours[1][1] and ours[1][3]["isExtendRequested"] is True, ours
    assert ours == theirs, list(zip(ours, theirs, strict=True))


def _admin_name(rest: Rest) -> str:
    return rest.client.get("/current-identity").json()["data"]["name"]
