"""``apply`` / ``test`` / ``why`` as a least-privilege identity (OpenZiti 2.0's permissions) on a
running controller: the run reads only the kinds its file names (and those they name, and the
policy picture for tests), writes only the kinds it changes, and a missing permission is named
in the error. The controller is the in-process app behind the same client interface the
``--controller`` path uses (``exchange.ApiBase``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.builders import Net
from tests.conftest import MGMT
from tests.netcode.conftest import EXAMPLE
from ziti_lite import exchange
from ziti_lite.netcode import apply, assertions, document, why
from ziti_lite.netcode.document import NetcodeError


class ClientApi(exchange.ApiBase):
    """The management API through the test client, as one identity (its API session token)."""

    def __init__(self, client, token: str):
        self.client, self.token = client, token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        r = self.client.request(method, MGMT + path, json=body, headers={"zt-session": self.token})
        return r.status_code, (r.json() if r.content else None)


@pytest.fixture
def as_identity(admin, client):
    """``as_identity(*permissions)``: a ClientApi logged in as a new identity holding them."""
    net = Net(admin)

    def make(*perms: str) -> ClientApi:
        ident, username = net.user()
        assert admin.patch(f"/identities/{ident}", json={"permissions": list(perms)}).status_code == 200
        return ClientApi(client, net.login(username, prefix=MGMT).token)
    return make


def _network(doc: dict | None = None) -> document.Network:
    text = yaml.safe_dump(doc) if doc is not None else EXAMPLE.read_text()
    return document.load(text, "network.yaml")


@pytest.mark.slow   # three rehearsals in scratch controllers (~1.5 s)
def test_a_read_only_operator_plans_tests_and_explains_but_cannot_write(as_identity, admin):
    api = as_identity("admin_readonly")
    network = _network()
    outcome = apply.apply_remote(api, network, prune=False, dry_run=True, say=lambda s: None)
    assert len(outcome.changes) == 8 and outcome.failures == []   # rehearsed, tests pass on the plan
    with pytest.raises(NetcodeError) as e:
        apply.apply_remote(api, network, prune=False, dry_run=False, say=lambda s: None)
    assert "identities: create refused (401): the identity needs one of the permissions identity," \
           " identity.create" in str(e.value)
    assert "done before it: nothing" in str(e.value)
    # once an admin applied it, the operator's tests and explanations read what they need
    apply.apply_remote(ClientApi(admin.client, admin.token), network, False, False, lambda s: None)
    assert assertions.results(api, network.tests) == [None] * len(network.tests)
    _, lines = why.explain(api, "echo-client", "echo", "Dial")
    assert lines == why.explain(ClientApi(admin.client, admin.token), "echo-client", "echo", "Dial")[1]
    assert lines[-1].startswith("verdict: echo-client ")


@pytest.mark.slow   # two rehearsals in scratch controllers (~0.8 s)
def test_apply_with_the_entity_permissions_its_document_needs(as_identity, admin):
    network = _network()
    perms = ("identity", "auth-policy.read", "external-jwt-signer.read", "config", "config-type.read", "service",
             "service-policy", "posture-check.read", "router.read", "edge-router-policy.read",
             "service-edge-router-policy.read")
    api = as_identity(*perms)
    outcome = apply.apply_remote(api, network, prune=False, dry_run=False, say=lambda s: None)
    assert outcome.applied and len(outcome.changes) == 8
    names = {s["name"] for s in admin.get("/services").json()["data"]}
    assert "echo" in names
    again = apply.apply_remote(api, network, prune=False, dry_run=False, say=lambda s: None)
    assert again.changes == []


def test_a_file_without_tests_reads_only_its_kinds_and_what_they_name(as_identity, admin):
    doc = {"services": [{"name": "team-svc", "encryptionRequired": True, "roleAttributes": ["team"]}]}
    # services name configs, configs name config types: nothing of identities or policies
    team = as_identity("service", "config.read", "config-type.read")
    outcome = apply.apply_remote(team, _network(doc), prune=False, dry_run=False, say=lambda s: None)
    assert outcome.applied
    doc["services"][0]["roleAttributes"] = ["team", "web"]
    outcome = apply.apply_remote(team, _network(doc), prune=True, dry_run=False, say=lambda s: None)
    assert outcome.applied
    assert [s["roleAttributes"] for s in admin.get('/services?filter=name="team-svc"').json()["data"]] == [
        ["team", "web"]]
    # without read on what the file names, the error says which permission is missing
    blind = as_identity("service")
    with pytest.raises(exchange.ExchangeError) as e:
        apply.apply_remote(blind, _network(doc), prune=False, dry_run=True, say=lambda s: None)
    assert str(e.value) == ("configs: read refused (401): the identity needs one of the permissions"
                            " admin_readonly, config, config.read")
