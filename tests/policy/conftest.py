"""Small builders shared by the policy tests."""

from __future__ import annotations

import itertools

import pytest

_n = itertools.count(1)


class Net:
    """Creates entities with unique names through the management API."""

    def __init__(self, api):
        self.api = api

    def identity(self, *attrs: str, name: str | None = None) -> str:
        return self.api.create("identities", {"name": name or f"id-{next(_n)}", "type": "User", "isAdmin": False,
                                              "roleAttributes": list(attrs)})

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

    def ids(self, path: str) -> set[str]:
        r = self.api.get(path)
        assert r.status_code == 200, r.text
        return {x["id"] for x in r.json()["data"]}


@pytest.fixture
def net(bare):
    return Net(bare)
