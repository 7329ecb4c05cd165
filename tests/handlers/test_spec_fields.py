"""The served spec declares every field a detail carries (``ziti_lite/handlers/spec.py``).

For every Resource with a detail operation: entities are made through the API (from the CRUD
contract's sample bodies; posture checks once per type, identities with an enrollment), each is
read back, and each field of the answer must be a property of that operation's detail schema
in the served document, with every required property present.
"""

from __future__ import annotations

import pytest

from tests.api.test_crud_contract import some_ids, uniq
from tests.conftest import CLIENT, MGMT
from ziti_lite.wiring import resources as registry

DETAILED = [r for r in registry() if "detail" in r.ops]

# more entities than the samples make, for fields only some rows carry
POSTURE_CHECKS = [
    {"typeId": "OS", "operatingSystems": [{"type": "Linux", "versions": [">=5.0.0"]}]},
    {"typeId": "DOMAIN", "domains": ["example.com"]},
    {"typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]},
    {"typeId": "PROCESS", "process": {"osType": "Linux", "path": "/bin/x", "hashes": ["AB"],
                                      "signerFingerprint": "CD"}},
    {"typeId": "PROCESS_MULTI", "semantic": "AnyOf",
     "processes": [{"osType": "Linux", "path": "/bin/y", "hashes": ["ab"], "signerFingerprints": ["cd"]}]},
    {"typeId": "MFA", "timeoutSeconds": 60, "promptOnWake": True, "promptOnUnlock": True,
     "ignoreLegacyEndpoints": True},
]


def _ids(admin, name: str) -> list[str]:
    if name == "posture-checks":
        return [admin.create(name, {"name": uniq("pc"), **body}) for body in POSTURE_CHECKS]
    if name == "identities":
        ott = admin.create(name, {"name": uniq("enrollee"), "type": "Device", "isAdmin": False,
                                  "enrollment": {"ott": True}})
        return [*some_ids(admin, name, 1), ott]
    return some_ids(admin, name, 1)


_DOCS: dict[str, dict] = {}


def _docs(admin) -> dict[str, dict]:
    """The served documents, read once for the module: the spec is the route table's, the same
    for every controller the tests make."""
    if not _DOCS:
        _DOCS.update({api: admin.client.get(f"{prefix}/specs/edge-{api}/spec").json()
                      for api, prefix in (("management", MGMT), ("client", CLIENT))})
    return _DOCS


def _detail_schema(doc: dict, path: str) -> dict:
    schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return schema["properties"]["data"]


@pytest.mark.parametrize("name", [pytest.param(r.name, id=r.name) for r in DETAILED])
def test_every_detail_field_is_in_the_served_spec(admin, name):
    res = next(r for r in DETAILED if r.name == name)
    docs = _docs(admin)
    for id in _ids(admin, name):
        for api in res.apis:
            prefix = MGMT if api == "management" else CLIENT
            r = admin.as_prefix(prefix).get(f"/{name}/{id}")
            assert r.status_code == 200, r.text
            item = r.json()["data"]
            schema = _detail_schema(docs[api], f"/{name}/{{id}}")
            undeclared = sorted(set(item) - set(schema["properties"]))
            assert not undeclared, f"{api} {name}: fields not in the spec: {undeclared}"
            missing = sorted(set(schema["required"]) - set(item))
            assert not missing, f"{api} {name}: required fields missing: {missing}"
