"""The served OpenAPI documents (``handlers/spec.py``): upstream v2.0.3's edition of each API,
built from the route table, so every declared operation (ziti-lite's own and those other modules
add) is in it with the permission it needs; YAML to a request that accepts it."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import CLIENT, MGMT
from ziti_lite import permissions, wiring
from ziti_lite.cli import cli


@pytest.mark.parametrize(("api", "prefix", "title"), [("management", MGMT, "Ziti Edge Management"),
                                                       ("client", CLIENT, "Ziti Edge Client")])
def test_each_spec_is_v2_0_3s_edition_with_every_declared_operation(client, api, prefix, title):
    r = client.get(f"{prefix}/specs/edge-{api}/spec")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["info"]["version"] == "0.29.0" and doc["info"]["title"] == title
    served = {(m.upper(), p): item for p, methods in doc["paths"].items() for m, item in methods.items()}
    declared = {(x.method, x.path): x for x in wiring.load().routes if x.api == api}
    assert set(served) == set(declared)
    for key, route in declared.items():
        assert served[key]["operationId"] == route.op_id
        if route.auth == "admin":
            assert served[key]["x-ziti-lite-permission"] == permissions.label(route.perm)


def test_a_request_that_accepts_yaml_gets_yaml(client):
    r = client.get(f"{MGMT}/specs/edge-management/spec", headers={"accept": "text/yaml"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/yaml")
    doc = yaml.load(r.text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert doc["info"]["version"] == "0.29.0" and "/controller-settings" in doc["paths"]
    assert doc == client.get(f"{MGMT}/specs/edge-management/spec").json()


def test_routes_lists_the_controller_settings_and_who_may_call_them():
    out = CliRunner().invoke(cli, ["routes"]).output
    lines = [line.split() for line in out.splitlines() if "/controller-settings" in line]
    assert {(x[0], x[1]) for x in lines} == {
        ("GET", "/controller-settings"), ("POST", "/controller-settings"), ("GET", "/controller-settings/{id}"),
        ("GET", "/controller-settings/{id}/effective"), ("PUT", "/controller-settings/{id}/effective"),
        ("PATCH", "/controller-settings/{id}/effective"), ("DELETE", "/controller-settings/{id}/effective")}
    assert all(x[2] == "management" and x[3] == "session" for x in lines)
    controllers = [line.split() for line in out.splitlines() if " /controllers " in line]
    assert {x[2] for x in controllers} == {"management", "client"}
