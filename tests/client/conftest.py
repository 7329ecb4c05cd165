"""A small network for client API tests: an edge router every identity and service may use,
two granted services (``web`` dialable, ``db`` bindable, each with a config), one ungranted
(``hidden``), and password identities that log in on the client API."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CLIENT, MGMT, Api, derive_template

INTERCEPT = "g7cIWbcGg"
HOST = "NH5p4FpGR"
WEB_INTERCEPT = {"protocols": ["tcp"], "addresses": ["web.ziti"], "portRanges": [{"low": 80, "high": 80}]}
DB_HOST = {"protocol": "tcp", "address": "localhost", "port": 5432}


def add_identity(admin, name: str, attrs=("staff",), is_admin: bool = False) -> tuple[str, str, str]:
    """An identity with a password authenticator: (id, username, password)."""
    iid = admin.create("identities", {"name": name, "type": "User", "isAdmin": is_admin, "roleAttributes": list(attrs)})
    username, password = f"{name}-user", f"Passw0rd-{name}"
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": username, "password": password})
    return iid, username, password


def client_login(client, username: str, password: str, **body) -> Api:
    r = client.post(CLIENT + "/authenticate?method=password", json={"username": username, "password": password, **body})
    assert r.status_code == 200, r.text
    return Api(client, CLIENT, r.json()["data"]["token"])


@dataclass
class Net:
    admin: Api
    client: object
    web: str
    db: str
    hidden: str
    router: str
    web_config: str
    db_config: str
    alice: tuple
    bob: tuple

    def login(self, who: tuple, **body) -> Api:
        return client_login(self.client, who[1], who[2], **body)


def build_network(admin: Api) -> dict:
    """The network of the docstring, made through the API (on a network without the default
    router policies): the ids ``Net`` holds."""
    router = admin.create("edge-routers", {"name": "er1", "roleAttributes": ["public"]})
    admin.create("edge-router-policies", {"name": "erp-all", "semantic": "AnyOf", "identityRoles": ["#all"],
                                          "edgeRouterRoles": ["#public"]})
    admin.create("service-edge-router-policies", {"name": "serp-all", "semantic": "AnyOf", "serviceRoles": ["#all"],
                                                  "edgeRouterRoles": ["#public"]})
    web_config = admin.create("configs", {"name": "web-intercept", "configTypeId": INTERCEPT, "data": WEB_INTERCEPT})
    db_config = admin.create("configs", {"name": "db-host", "configTypeId": HOST, "data": DB_HOST})
    web = admin.create("services", {"name": "web", "encryptionRequired": True, "roleAttributes": ["web"],
                                    "configs": [web_config]})
    db = admin.create("services", {"name": "db", "encryptionRequired": True, "roleAttributes": ["db"],
                                   "configs": [db_config]})
    hidden = admin.create("services", {"name": "hidden", "encryptionRequired": True})
    admin.create("service-policies", {"name": "dial-web", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#staff"], "serviceRoles": ["#web"]})
    admin.create("service-policies", {"name": "bind-db", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": ["#staff"], "serviceRoles": ["#db"]})
    alice = add_identity(admin, "alice")
    bob = add_identity(admin, "bob")
    return dict(web=web, db=db, hidden=hidden, router=router, web_config=web_config, db_config=db_config,
                alice=alice, bob=bob)


@pytest.fixture(scope="session")
def client_net_template(bare_template) -> tuple[Path, dict]:
    """The bare template with the network built in (once a session): (database file, ids)."""
    return derive_template(bare_template, "client-net-template.db", build_network)


@pytest.fixture
def net(client_net_template, bare, client) -> Net:
    """The network, copied with the database (``db_path`` takes the most specific template)."""
    return Net(bare, client, **client_net_template[1])


def mgmt(api: Api) -> Api:
    return api.as_prefix(MGMT)


# the live TLS controller and keys of the PKI tests, for the end-to-end test
from tests.enroll.conftest import keys, live  # noqa: E402,F401
