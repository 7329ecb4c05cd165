"""The tests' one builder of networks: entities with unique names made through the management
API as a client would (identities, services, routers, posture checks, the three policy kinds,
auth policies, users with passwords), and logins as those users."""

from __future__ import annotations

import copy
import itertools

from tests.conftest import CLIENT, Api

_n = itertools.count(1)

PASSWORD = "Secret-Passw0rd"

# an auth policy that allows every primary method and asks for no second factor
DEFAULT_POLICY = {
    "primary": {
        "cert": {"allowed": True, "allowExpiredCerts": True},
        "extJwt": {"allowed": True, "allowedSigners": []},
        "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 0, "minPasswordLength": 5,
                 "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False},
    },
    "secondary": {"requireTotp": False},
}


def merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in changes.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


class Net:
    """Creates entities with unique names through the management API (``api``, an admin)."""

    def __init__(self, api: Api):
        self.api = self.admin = api
        self.client = api.client

    def identity(self, *attrs: str, name: str | None = None, policy: str | None = None,
                 external_id: str | None = None) -> str:
        body: dict = {"name": name or f"id-{next(_n)}", "type": "User", "isAdmin": False,
                      "roleAttributes": list(attrs)}
        if policy:
            body["authPolicyId"] = policy
        if external_id:
            body["externalId"] = external_id
        return self.api.create("identities", body)

    def service(self, *attrs: str, name: str | None = None) -> str:
        return self.api.create("services", {"name": name or f"svc-{next(_n)}", "encryptionRequired": True,
                                            "roleAttributes": list(attrs)})

    def router(self, *attrs: str, name: str | None = None, tunneler: bool = False) -> str:
        return self.api.create("edge-routers", {"name": name or f"er-{next(_n)}", "roleAttributes": list(attrs),
                                                "isTunnelerEnabled": tunneler})

    def posture_check(self, *attrs: str, name: str | None = None) -> str:
        return self.api.create("posture-checks", {"name": name or f"pc-{next(_n)}", "typeId": "DOMAIN",
                                                  "domains": ["example.com"], "roleAttributes": list(attrs)})

    def sp(self, type: str = "Dial", identities=(), services=(), checks=(), semantic: str = "AnyOf",
           name: str | None = None) -> str:
        return self.api.create("service-policies", {
            "name": name or f"sp-{next(_n)}", "type": type, "semantic": semantic, "identityRoles": list(identities),
            "serviceRoles": list(services), "postureCheckRoles": list(checks)})

    def erp(self, identities=(), routers=(), semantic: str = "AnyOf", name: str | None = None) -> str:
        return self.api.create("edge-router-policies", {
            "name": name or f"erp-{next(_n)}", "semantic": semantic, "identityRoles": list(identities),
            "edgeRouterRoles": list(routers)})

    def serp(self, services=(), routers=(), semantic: str = "AnyOf", name: str | None = None) -> str:
        return self.api.create("service-edge-router-policies", {
            "name": name or f"serp-{next(_n)}", "semantic": semantic, "serviceRoles": list(services),
            "edgeRouterRoles": list(routers)})

    def policy(self, **changes) -> str:
        """An auth policy: ``DEFAULT_POLICY`` with ``changes`` merged in."""
        return self.api.create("auth-policies", merge({"name": f"policy-{next(_n)}", **DEFAULT_POLICY}, changes))

    def user(self, name: str | None = None, policy: str | None = None, password: str = PASSWORD) -> tuple[str, str]:
        """An identity with a password authenticator: (identity id, username)."""
        ident = self.identity(name=name, policy=policy)
        username = f"login-{ident}"
        self.api.create("authenticators", {"method": "updb", "identityId": ident, "username": username,
                                           "password": password})
        return ident, username

    def authenticate(self, username: str, password: str = PASSWORD, prefix: str = CLIENT):
        return self.client.post(prefix + "/authenticate?method=password",
                                json={"username": username, "password": password})

    def login(self, username: str, password: str = PASSWORD, prefix: str = CLIENT) -> Api:
        r = self.authenticate(username, password, prefix)
        assert r.status_code == 200, r.text
        return Api(self.client, prefix, r.json()["data"]["token"])

    def ids(self, path: str) -> set[str]:
        r = self.api.get(path)
        assert r.status_code == 200, r.text
        return {x["id"] for x in r.json()["data"]}
