"""OpenZiti 2.0's permission model, the same scenario against ziti-lite and the real v2.0.3
controller (``ziti edge quickstart``), answers compared (issue 34).

As admin, the scenario creates identities holding permissions (``admin_readonly``,
``identity.read``, ``service``, ``identity.create`` + ``enrollment.create``, ``ops``,
``identity``, ``enrollment``, none at all), gives each a password authenticator and logs in as
each through the management API, as a client would. Then every one of them (and the admin) runs the same
representative set of operations: list, detail, create, update and delete of identities,
services, configs, service policies, edge routers, enrollments and API sessions, lists through
another entity (``/service-policies/{id}/services``, ``/identities/{id}/service-policies``, ...),
the lists of the other collections, the fabric API's routers, links, services, circuits and
terminators; revocations of each type, their refusals and who may list, read and create them.
Then admin protection (a non-admin creating an admin or an identity with
permissions, changing ``isAdmin`` or ``permissions``, ``PUT`` on identities, changing, disabling,
tracing or deleting an admin identity, removing its MFA, an admin's enrollments: create, list,
read, refresh, delete), unknown permission values, and identities demoted, promoted or given or
stripped of a permission, checked on their next request.

Compared, step by step: the status, ``error.code``, the cause's field names and ``field`` (as
``test_differential.py`` compares them), an identity's ``permissions`` where an answer carries
them, and for the steps that ask, a list's ``totalCount``. Ids, times and tokens differ and are
never compared (each side keeps its own ids under the script's names). A difference kept on
purpose is a row of ``differences.tsv`` whose step pattern starts with ``perm `` (the v1.3.3
differential leaves those rows to this test); a new difference fails the test, and so does a
row that no longer differs.

The binary is found as ``make interop`` finds each router line's (``$ZITI_CLI_V2_0_3`` or the
cache ``~/.cache/ziti-lite/ziti-cli-v2.0.3/ziti``); skipped, saying why, where none is at hand.

Run by hand against two running controllers (``python -m tests.interop.test_permissions_v2
UPSTREAM_URL UPSTREAM_PASSWORD LITE_URL LITE_PASSWORD [PREFIX]``) it prints the differences.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop.conftest import start_quickstart
from tests.interop.test_differential import PERM_ROWS, TABLE, Filler, assert_documented, read_table, subst
from ziti_lite import testing

pytestmark = pytest.mark.interop
V2 = "v2.0.3"
MGMT = "/edge/management/v1"
ROW_PREFIX = PERM_ROWS        # the rows of differences.tsv this test reads (and the v1.3.3 one leaves)
PASSWORD = "Perm-Passw0rd!"
FUTURE = "2099-01-01T00:00:00Z"
INTERCEPT_V1 = "g7cIWbcGg"    # intercept.v1's id, the same on both controllers
INTERCEPT = {"protocols": ["tcp"], "addresses": ["perm.ziti"], "portRanges": [{"low": 80, "high": 80}]}

# the identities the scenario logs in as, and their permissions
USERS: dict[str, list[str]] = {
    "ro": ["admin_readonly"],
    "idread": ["identity.read"],
    "svc": ["service"],
    "ci": ["identity.create", "enrollment.create"],
    "ops": ["ops"],
    "idfull": ["identity"],
    "enr": ["enrollment"],
    "none": [],
}


@dataclass
class Step:
    name: str
    method: str                 # an HTTP method, or LOGIN (body: username; save: the caller's name)
    path: str                   # management API unless it starts with /fabric/
    body: Any = None
    auth: str = "admin"         # whose session: admin or a name of USERS (or another logged-in one)
    save: str = ""              # keep data.id under this name ("name=dotted.path": that value)
    count: bool = False         # compare the list's totalCount too
    shows: str = ""             # compare whether the answer has a value at this dotted path too


def script(p: str) -> list[Step]:
    """The scenario; ``p`` prefixes every name it creates (a controller may run it more than once)."""
    out: list[Step] = []

    def s(name: str, method: str, path: str, body: Any = None, **kw) -> None:
        out.append(Step(name, method, path, body, **kw))

    def ident(name: str, **extra) -> dict:
        return {"name": p + name, "type": "User", "isAdmin": False, **extra}

    # --- as admin: the identities with permissions, their passwords, their sessions
    for user, perms in USERS.items():
        s(f"create identity {user} with {perms}", "POST", "/identities", ident(user, permissions=perms), save=user)
        s(f"detail identity {user}", "GET", f"/identities/{{{user}}}")
        s(f"password of {user}", "POST", "/authenticators", {"method": "updb", "identityId": f"{{{user}}}",
                                                            "username": p + user, "password": PASSWORD})
        s(f"login {user}", "LOGIN", "", p + user, save=user)
    s("create admin identity boss", "POST", "/identities", ident("boss", isAdmin=True), save="boss")
    s("password of boss", "POST", "/authenticators", {"method": "updb", "identityId": "{boss}",
                                                      "username": p + "boss", "password": PASSWORD})
    s("login boss", "LOGIN", "", p + "boss", save="boss")
    s("create admin identity adm", "POST", "/identities", ident("adm", isAdmin=True), save="adm")
    s("create admin identity with an enrollment", "POST", "/identities",
      ident("adm-enr", isAdmin=True, enrollment={"ott": True}), save="adm_enr_id")
    s("the admin's enrollment", "GET", '/enrollments?filter=identity="{adm_enr_id}"', save="adm_enr=data.0.id")
    s("create identity victim", "POST", "/identities", ident("victim"), save="victim")
    s("password of victim", "POST", "/authenticators", {"method": "updb", "identityId": "{victim}",
                                                        "username": p + "victim", "password": PASSWORD})

    # --- as admin: what the operations work on
    s("create target identity", "POST", "/identities", ident("target", roleAttributes=["perm"]), save="target")
    s("create target service", "POST", "/services", {"name": p + "svc-t", "encryptionRequired": True,
                                                      "roleAttributes": ["perm"]}, save="svc_t")
    s("create target config", "POST", "/configs", {"name": p + "cfg-t", "configTypeId": INTERCEPT_V1,
                                                    "data": INTERCEPT}, save="cfg_t")
    s("create target service policy", "POST", "/service-policies", {
        "name": p + "sp-t", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#perm"],
        "serviceRoles": ["#perm"]}, save="sp_t")
    s("create target edge router", "POST", "/edge-routers", {"name": p + "er-t", "roleAttributes": ["perm"]},
      save="er_t")
    s("create target enrollment's identity", "POST", "/identities", ident("enr-t", enrollment={"ott": True}),
      save="enr_t_id")
    s("target enrollment", "GET", '/enrollments?filter=identity="{enr_t_id}"', save="enr_t=data.0.id")
    who = ["admin", *USERS]
    for u in who:
        s(f"delete target identity for {u}", "POST", "/identities", ident(f"del-id-{u}"), save=f"del_id_{u}")
        s(f"delete target service for {u}", "POST", "/services", {"name": f"{p}del-svc-{u}",
                                                                   "encryptionRequired": True}, save=f"del_svc_{u}")
        s(f"delete target config for {u}", "POST", "/configs", {"name": f"{p}del-cfg-{u}",
                                                                 "configTypeId": INTERCEPT_V1, "data": INTERCEPT},
          save=f"del_cfg_{u}")
        s(f"delete target service policy for {u}", "POST", "/service-policies", {
            "name": f"{p}del-sp-{u}", "type": "Bind", "semantic": "AllOf"}, save=f"del_sp_{u}")
        s(f"delete target edge router for {u}", "POST", "/edge-routers", {"name": f"{p}del-er-{u}"},
          save=f"del_er_{u}")
        s(f"delete target enrollment's identity for {u}", "POST", "/identities",
          ident(f"del-enr-{u}", enrollment={"ott": True}), save=f"del_enr_id_{u}")
        s(f"delete target enrollment for {u}", "GET", f'/enrollments?filter=identity="{{del_enr_id_{u}}}"',
          save=f"del_enr_{u}=data.0.id")
        s(f"enrollment target identity for {u}", "POST", "/identities", ident(f"enr-for-{u}"), save=f"enr_for_{u}")
        s(f"api session to delete for {u}", "LOGIN", "", p + "victim", save=f"sess_{u}")

    # --- each caller, the same operations
    crud = {
        "identities": ("target", lambda u: ident(f"new-id-{u}")),
        "services": ("svc_t", lambda u: {"name": f"{p}new-svc-{u}", "encryptionRequired": True}),
        "configs": ("cfg_t", lambda u: {"name": f"{p}new-cfg-{u}", "configTypeId": INTERCEPT_V1, "data": INTERCEPT}),
        "service-policies": ("sp_t", lambda u: {"name": f"{p}new-sp-{u}", "type": "Dial", "semantic": "AnyOf"}),
        "edge-routers": ("er_t", lambda u: {"name": f"{p}new-er-{u}"}),
    }
    dels = {"identities": "del_id", "services": "del_svc", "configs": "del_cfg", "service-policies": "del_sp",
            "edge-routers": "del_er"}
    related = ["/service-policies/{sp_t}/services", "/service-policies/{sp_t}/identities",
               "/service-policies/{sp_t}/posture-checks", "/identities/{target}/service-policies",
               "/identities/{target}/services", "/identities/{target}/edge-routers",
               "/identities/{target}/authenticators", "/identities/{target}/enrollments",
               "/services/{svc_t}/configs", "/services/{svc_t}/service-policies", "/services/{svc_t}/identities",
               "/edge-routers/{er_t}/identities", "/edge-routers/{er_t}/services", "/configs/{cfg_t}/services"]
    for u in who:
        for coll, (target, body) in crud.items():
            s(f"{u}: list {coll}", "GET", f"/{coll}", auth=u)
            s(f"{u}: detail {coll}", "GET", f"/{coll}/{{{target}}}", auth=u)
            s(f"{u}: create {coll}", "POST", f"/{coll}", body(u), auth=u)
            # (a config's PATCH carries its data: upstream validates an absent one as null)
            change = {"tags": {"by": u}, **({"data": INTERCEPT} if coll == "configs" else {})}
            s(f"{u}: update {coll}", "PATCH", f"/{coll}/{{{target}}}", change, auth=u)
            s(f"{u}: delete {coll}", "DELETE", f"/{coll}/{{{dels[coll]}_{u}}}", auth=u)
        s(f"{u}: list enrollments", "GET", "/enrollments", auth=u)
        s(f"{u}: detail enrollments", "GET", "/enrollments/{enr_t}", auth=u)
        s(f"{u}: create enrollments", "POST", "/enrollments", {"method": "ott", "identityId": f"{{enr_for_{u}}}",
                                                               "expiresAt": FUTURE}, auth=u)
        s(f"{u}: refresh enrollments", "POST", "/enrollments/{enr_t}/refresh", {"expiresAt": FUTURE}, auth=u)
        s(f"{u}: delete enrollments", "DELETE", f"/enrollments/{{del_enr_{u}}}", auth=u)
        s(f"{u}: list api-sessions", "GET", "/api-sessions", auth=u)
        s(f"{u}: detail api-sessions", "GET", f"/api-sessions/{{sess_{u}}}", auth=u)
        s(f"{u}: delete api-sessions", "DELETE", f"/api-sessions/{{sess_{u}}}", auth=u)
        for path in related:
            s(f"{u}: related {path}", "GET", path, auth=u)
        for fabric in ("routers", "links", "services", "terminators", "circuits"):
            s(f"{u}: fabric {fabric}", "GET", f"/fabric/v1/{fabric}", auth=u)
        for coll in ("config-types", "edge-router-policies", "service-edge-router-policies", "posture-checks",
                     "auth-policies", "cas", "external-jwt-signers", "terminators", "sessions", "transit-routers"):
            s(f"{u}: list {coll}", "GET", f"/{coll}", auth=u)
        s(f"{u}: list authenticators", "GET", "/authenticators", auth=u)
        s(f"{u}: summary", "GET", "/summary", auth=u)
        s(f"{u}: list identity-types", "GET", "/identity-types", auth=u)
        s(f"{u}: current identity", "GET", "/current-identity", auth=u)

    s("admin: patch a config's tags only", "PATCH", "/configs/{cfg_t}", {"tags": {"only": "tags"}})

    # --- admin protection
    for u in ("ci", "idfull", "svc"):
        s(f"{u}: create an admin", "POST", "/identities", ident(f"mk-adm-{u}", isAdmin=True), auth=u)
        s(f"{u}: create an identity with permissions", "POST", "/identities",
          ident(f"mk-perm-{u}", permissions=["service"]), auth=u)
        s(f"{u}: create an identity with no permissions", "POST", "/identities",
          ident(f"mk-noperm-{u}", permissions=[]), auth=u)
    u = "idfull"
    s(f"{u}: make an identity admin", "PATCH", "/identities/{target}", {"isAdmin": True}, auth=u)
    s(f"{u}: isAdmin false on a non-admin", "PATCH", "/identities/{target}", {"isAdmin": False}, auth=u)
    s(f"{u}: grant permissions", "PATCH", "/identities/{target}", {"permissions": ["service"]}, auth=u)
    s(f"{u}: empty permissions", "PATCH", "/identities/{target}", {"permissions": []}, auth=u)
    s(f"{u}: grant itself permissions", "PATCH", "/identities/{idfull}", {"permissions": ["identity", "service"]},
      auth=u)
    s(f"{u}: put an identity", "PUT", "/identities/{target}", ident("target", roleAttributes=["perm"]), auth=u)
    s(f"{u}: read an admin", "GET", "/identities/{adm}", auth=u)
    s(f"{u}: update an admin", "PATCH", "/identities/{adm}", {"tags": {"by": u}}, auth=u)
    s(f"{u}: rename an admin", "PATCH", "/identities/{adm}", {"name": p + "adm2"}, auth=u)
    s(f"{u}: disable an admin", "POST", "/identities/{adm}/disable", {"durationMinutes": 5}, auth=u)
    s(f"{u}: enable an admin", "POST", "/identities/{adm}/enable", auth=u)
    s(f"{u}: trace an admin", "PUT", "/identities/{adm}/trace", {"enabled": True, "duration": "1m"}, auth=u)
    s(f"{u}: remove an admin's mfa", "DELETE", "/identities/{adm}/mfa", auth=u)
    s(f"{u}: policy advice of an admin", "GET", "/identities/{adm}/policy-advice/{svc_t}", auth=u)
    s(f"{u}: disable a non-admin", "POST", "/identities/{target}/disable", {"durationMinutes": 5}, auth=u)
    s(f"{u}: enable a non-admin", "POST", "/identities/{target}/enable", auth=u)
    s(f"{u}: delete an admin", "DELETE", "/identities/{adm}", auth=u)
    s("admin still there", "GET", "/identities/{adm}")
    s("target unchanged", "GET", "/identities/{target}")
    s("idfull unchanged", "GET", "/identities/{idfull}")
    for u in ("ci", "enr"):
        s(f"{u}: enrollment for an admin", "POST", "/enrollments", {"method": "ott", "identityId": "{adm}",
                                                                    "expiresAt": FUTURE}, auth=u)
    for u in ("enr", "ro", "admin"):
        s(f"{u}: list an admin's enrollments", "GET", '/enrollments?filter=identity="{adm_enr_id}"', auth=u,
          count=True)
        s(f"{u}: list an edge router's enrollments", "GET", '/enrollments?filter=edgeRouter="{er_t}"', auth=u,
          count=True)
    s("ro: read an admin's enrollment", "GET", "/enrollments/{adm_enr}", auth="ro")
    for u in ("ro", "idread", "admin"):
        s(f"{u}: an admin's pending enrollment in its detail", "GET", "/identities/{adm_enr_id}", auth=u,
          shows="data.enrollment.ott.token")
    s("ro: an admin's enrollments through the identity", "GET", "/identities/{adm_enr_id}/enrollments", auth="ro",
      count=True)
    s("enr: read an admin's enrollment", "GET", "/enrollments/{adm_enr}", auth="enr")
    s("enr: refresh an admin's enrollment", "POST", "/enrollments/{adm_enr}/refresh", {"expiresAt": FUTURE},
      auth="enr")
    s("enr: delete an admin's enrollment", "DELETE", "/enrollments/{adm_enr}", auth="enr")

    # --- revocations (OpenZiti 2.0's /revocations): each type, refusals, no delete, who may
    def uid(name: str) -> str:     # a UUID of its own per scenario run, the same on both sides
        return str(uuid.uuid5(uuid.NAMESPACE_URL, p + name))
    s("revoke a jti", "POST", "/revocations", {"id": uid("jti"), "type": "JTI", "tags": {"by": "admin"}})
    s("revoke the same jti again", "POST", "/revocations", {"id": uid("jti"), "type": "JTI"})
    s("revoke an api session", "POST", "/revocations", {"id": uid("asid"), "type": "API_SESSION"})
    s("revoke an identity", "POST", "/revocations", {"id": "{victim}", "type": "IDENTITY"})
    s("detail a jti revocation", "GET", f"/revocations/{uid('jti')}")
    s("detail an identity revocation", "GET", "/revocations/{victim}")
    s("detail an unknown revocation", "GET", f"/revocations/{uid('nope')}")
    s("list api session revocations", "GET", f'/revocations?filter=id="{uid("asid")}"', count=True)
    s("list revocations by type", "GET", f'/revocations?filter=type="JTI" and id="{uid("jti")}"', count=True)
    s("list revocations by an unknown field", "GET", '/revocations?filter=reason="x"')
    s("revoke a jti that is no uuid", "POST", "/revocations", {"id": "not-a-uuid", "type": "JTI"})
    s("revoke a legacy api session", "POST", "/revocations", {"id": "{sess_none}", "type": "API_SESSION"})
    s("revoke an unknown identity", "POST", "/revocations", {"id": uid("ghost"), "type": "IDENTITY"})
    s("revoke of an unknown type", "POST", "/revocations", {"id": uid("t"), "type": "TOKEN"})
    s("revoke without a type", "POST", "/revocations", {"id": uid("t")})
    s("revoke without an id", "POST", "/revocations", {"type": "JTI"})
    s("delete a revocation", "DELETE", f"/revocations/{uid('jti')}")
    s("patch a revocation", "PATCH", f"/revocations/{uid('jti')}", {"tags": {"x": "y"}})
    for u in ("ro", "idfull", "ops", "none"):
        s(f"{u}: list revocations", "GET", "/revocations", auth=u)
        s(f"{u}: detail revocations", "GET", f"/revocations/{uid('jti')}", auth=u)
        s(f"{u}: create revocations", "POST", "/revocations", {"id": uid("by-" + u), "type": "JTI"}, auth=u)
    # (but for the admin adm, which upstream lets idfull disable: a documented difference)
    s("identity revocations (deletions and disablings made some)", "GET",
      '/revocations?filter=type="IDENTITY" and id != "{adm}"', count=True)

    # --- unknown permission values
    s("create with an unknown permission", "POST", "/identities", ident("bad", permissions=["service", "nope"]))
    s("create with a permission not a string", "POST", "/identities", ident("bad2", permissions=["service", 3]))
    s("patch with an unknown permission", "PATCH", "/identities/{target}", {"permissions": ["nope"]})
    s("put with an unknown permission", "PUT", "/identities/{target}",
      ident("target", roleAttributes=["perm"], permissions=["identity.read", "ops.create"]))
    s("create with a duplicate permission", "POST", "/identities", ident("dup", permissions=["service", "service"]),
      save="dup")
    s("detail the duplicate", "GET", "/identities/{dup}")
    s("create with permissions null", "POST", "/identities", ident("nullperm", permissions=None), save="nullperm")
    s("detail permissions null", "GET", "/identities/{nullperm}")
    s("admin grants permissions", "PATCH", "/identities/{target}", {"permissions": ["config.read", "ca"]})
    s("detail granted", "GET", "/identities/{target}")
    s("list by permissions", "GET", f'/identities?filter=name="{p}target"')

    # --- changes count from the next request
    s("boss before demotion", "GET", "/identities", auth="boss")
    s("demote boss", "PATCH", "/identities/{boss}", {"isAdmin": False})
    s("boss after demotion", "GET", "/identities", auth="boss")
    s("boss current identity after demotion", "GET", "/current-identity", auth="boss")
    s("svc before losing service", "GET", "/services", auth="svc")
    s("remove svc's permissions", "PATCH", "/identities/{svc}", {"permissions": []})
    s("svc after losing service", "GET", "/services", auth="svc")
    s("none before a grant", "GET", "/services", auth="none")
    s("grant none service.read", "PATCH", "/identities/{none}", {"permissions": ["service.read"]})
    s("none after the grant", "GET", "/services", auth="none")
    s("none creates after the grant", "POST", "/services", {"name": p + "none-svc", "encryptionRequired": True},
      auth="none")
    s("promote ro", "PATCH", "/identities/{ro}", {"isAdmin": True})
    s("ro after promotion", "POST", "/services", {"name": p + "ro-svc", "encryptionRequired": True}, auth="ro")
    return out


# ------------------------------------------------------------------ one controller
class Side:
    def __init__(self, url: str, admin_user: str, admin_password: str):
        self.http = httpx.Client(base_url=url, verify=False, timeout=30)  # loopback, each controller's own PKI
        self.vars: dict[str, str] = {}
        self.tokens: dict[str, str] = {}
        status, body = self._login(admin_user, admin_password)
        assert status == 200, body
        self.tokens["admin"] = body["data"]["token"]

    def close(self) -> None:
        self.http.close()

    def _login(self, user: str, password: str):
        r = self.http.post(MGMT + "/authenticate?method=password", json={"username": user, "password": password})
        return r.status_code, _json(r)

    def run(self, step: Step) -> tuple[int, Any]:
        fill = Filler(self.vars)
        if step.method == "LOGIN":
            status, body = self._login(step.body, PASSWORD)
            if status == 200:
                self.tokens[step.save] = body["data"]["token"]
                self.vars["sess_of_" + step.save] = body["data"]["id"]
                if step.save.startswith("sess_"):
                    self.vars[step.save] = body["data"]["id"]
            return status, body
        path = step.path.format_map(fill)
        path = path if path.startswith("/fabric/") else MGMT + path
        token = self.tokens.get(step.auth, "missing-" + step.auth)
        kw: dict[str, Any] = {"headers": {"zt-session": token}}
        if step.body is not None or step.method in ("POST", "PUT", "PATCH"):
            kw["content"] = json.dumps(subst(step.body, fill)).encode()
            kw["headers"]["content-type"] = "application/json"
        r = self.http.request(step.method, path, **kw)
        body = _json(r)
        if step.save and r.status_code in (200, 201) and isinstance(body, dict):
            name, _, dotted = step.save.partition("=")
            value = _at(body, dotted or "data.id")
            if isinstance(value, str):
                self.vars[name] = value
        return r.status_code, body


def _json(r: httpx.Response) -> Any:
    try:
        return r.json() if r.content else None
    except ValueError:
        return r.text


# ------------------------------------------------------------------ comparing
def compare(up: tuple[int, Any], lite: tuple[int, Any], count: bool = False,
            shows: str = "") -> list[tuple[str, str]]:
    """Status, error code, the cause's field names and field; an identity's permissions; with
    ``count``, a list's totalCount; with ``shows``, whether there is a value at that path."""
    out: list[tuple[str, str]] = []
    (su, bu), (sl, bl) = up, lite
    if su != sl:
        out.append(("status", f"{su} != {sl}"))
    if not isinstance(bu, dict) or not isinstance(bl, dict):
        if type(bu) is not type(bl):
            out.append(("body", f"{type(bu).__name__} != {type(bl).__name__}"))
        return out
    if "error" in bu or "error" in bl:
        eu, el = bu.get("error") or {}, bl.get("error") or {}
        if eu.get("code") != el.get("code"):
            out.append(("code", f"{eu.get('code')} != {el.get('code')}"))
        cu, cl = eu.get("cause"), el.get("cause")
        if (cu is None) != (cl is None):
            out.append(("cause", f"{cu is not None} != {cl is not None}"))
        elif isinstance(cu, dict) and isinstance(cl, dict):
            if set(cu) != set(cl):
                out.append(("cause", f"{sorted(cu)} != {sorted(cl)}"))
            elif cu.get("field") != cl.get("field"):
                out.append(("cause.field", f"{cu.get('field')} != {cl.get('field')}"))
        return out
    if shows:
        hu, hl = (_at(b, shows) is not None for b in (bu, bl))
        if hu != hl:
            out.append(("shows", f"{shows} {hu} != {hl}"))
    if count:
        tu, tl = (((b.get("meta") or {}).get("pagination") or {}).get("totalCount") for b in (bu, bl))
        if tu != tl:
            out.append(("totalCount", f"{tu} != {tl}"))
    du, dl = bu.get("data"), bl.get("data")
    items = [(du, dl)] if isinstance(du, dict) and isinstance(dl, dict) else (
        list(zip(du, dl)) if isinstance(du, list) and isinstance(dl, list) and len(du) == len(dl) == 1 else [])
    for a, b in items:
        if isinstance(a, dict) and isinstance(b, dict) and ("permissions" in a or "permissions" in b):
            if a.get("permissions", "absent") != b.get("permissions", "absent"):
                out.append(("permissions", f"{a.get('permissions', 'absent')} != {b.get('permissions', 'absent')}"))
    return out


def _at(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if isinstance(value, list):
            value = value[int(part)] if part.isdigit() and int(part) < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def differences(upstream: Side, ours: Side, prefix: str) -> tuple[list[tuple[str, str, str]], list[dict]]:
    found: list[tuple[str, str, str]] = []
    bodies: list[dict] = []
    for step in script(prefix):
        a, b = upstream.run(step), ours.run(step)
        bodies.append({"step": step.name, "openziti": a, "ziti-lite": b})
        for kind, detail in compare(a, b, step.count, step.shows):
            found.append((ROW_PREFIX + step.name, kind, detail))
    return found, bodies


# ------------------------------------------------------------------ the test
def test_the_permission_scenario_answers_as_openziti_v2(ziti2, ziti_lite_template, tmp_path):
    lite = testing.start(ziti_lite_template.copy(tmp_path / "perm.db"), ziti_lite_template.admin_password)
    real = None
    try:
        real = start_quickstart(ziti2, tmp_path / "openziti-v2", V2)
        upstream = Side(real.url, real.admin_user, real.admin_password)
        ours = Side(lite.url, lite.admin_user, lite.admin_password)
        found, bodies = differences(upstream, ours, "pv2-")
        upstream.close()
        ours.close()
    finally:
        lite.stop()
        if real is not None:
            real.stop()
    report = os.environ.get("ZITI_LITE_DIFF_REPORT")
    if report:
        Path(report).write_text("\n".join("\t".join(f) for f in found) + "\n")
        Path(report + ".json").write_text(json.dumps(bodies, indent=1, default=str))
    table = [d for d in read_table(TABLE) if d.step.startswith(ROW_PREFIX)]
    print(f"{len(bodies)} requests compared, {len(found)} documented or new differences")
    assert_documented(found, table)


if __name__ == "__main__":  # by hand: two running controllers, the differences printed
    up_url, up_pw, lite_url, lite_pw = sys.argv[1:5]
    prefix = sys.argv[5] if len(sys.argv) > 5 else "pv2-"
    upstream, ours = Side(up_url, "admin", up_pw), Side(lite_url, "admin", lite_pw)
    found, bodies = differences(upstream, ours, prefix)
    for row in found:
        print("\t".join(row))
    print(f"{len(bodies)} requests compared, {len(found)} differences", file=sys.stderr)
