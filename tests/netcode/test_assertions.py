"""The ``tests`` of a network file: each form, failures that say why, ``ziti-lite test`` on the
network as it is, and agreement with the policy engine's relationship lists on random networks."""

from __future__ import annotations

import random

import pytest

from tests.netcode.conftest import EXAMPLE, invoke, write
from ziti_lite import exchange
from ziti_lite.edge.entity import ensure_router
from ziti_lite.netcode import apply, assertions, document


def test_every_form_through_ziti_lite_test(admin, ctl, db_path, tmp_path):
    ensure_router(ctl, "ziti-lite")
    assert invoke("apply", "--db", db_path, EXAMPLE).exit_code == 0
    host = admin.get('/identities?filter=name="echo-host"').json()["data"][0]["id"]
    tests = [
        {"identity": "echo-client", "service": "echo", "router": "ziti-lite"},
        {"identity": "echo-client", "service": "echo", "router": "ziti-lite", "can": "dial"},
        {"identity": "visitor", "service": "echo", "router": "ziti-lite", "cannot": "dial"},
        {"identity": "@" + host, "services": ["echo"], "policyType": "bind"},
        {"identity": "visitor", "services": []},
    ]
    f = write(tmp_path / "t.json", {"tests": tests})
    r = invoke("test", "--db", db_path, f)
    assert r.exit_code == 0, r.output
    assert r.output.count("ok     ") == 5 and "tests: 5 of 5 pass" in r.output

    # the identity loses its router: the router assertion fails and says which policy kind is missing
    erp = admin.get('/edge-router-policies?filter=name="all-endpoints-public-routers"').json()["data"][0]["id"]
    assert admin.delete(f"/edge-router-policies/{erp}").status_code == 200
    wrong = [{"name": "via router", "identity": "echo-client", "service": "echo", "router": "ziti-lite"},
             {"identity": "echo-client", "services": ["echo", "other"]},
             {"identity": "echo-host", "service": "echo", "cannot": "bind"},
             {"identity": "nobody", "service": "echo", "can": "dial"}]
    f = write(tmp_path / "t.json", {"tests": wrong})
    r = invoke("test", "--db", db_path, f)
    assert r.exit_code == 1
    assert ("FAILED via router: echo-client reaches echo through edge router ziti-lite: not through ziti-lite:"
            " no edge router policy gives it to the identity") in r.output
    assert "FAILED echo-client has exactly the dial services [echo, other]: no service named 'other'" in r.output
    assert "FAILED echo-host cannot bind echo: it can: echo-bind: identity matched by @echo-host" in r.output
    assert "FAILED nobody can dial echo: no identity named 'nobody'" in r.output
    assert "tests: 0 of 4 pass" in r.output


def random_network(rng: random.Random) -> dict:
    attrs = ["a", "b", "c"]

    def roles(pool_names):
        out = {"#" + a for a in rng.sample(attrs, rng.randint(0, 2))}
        out |= {"@" + n for n in rng.sample(pool_names, rng.randint(0, min(2, len(pool_names))))}
        return ["#all"] if rng.random() < 0.15 else sorted(out)

    identities = [f"i{n}" for n in range(rng.randint(2, 5))]
    services = [f"s{n}" for n in range(rng.randint(2, 4))]
    routers = [f"r{n}" for n in range(rng.randint(1, 3))]
    pick = lambda: rng.sample(attrs, rng.randint(0, 2))   # noqa: E731
    return {
        "identities": [{"name": n, "isAdmin": False, "roleAttributes": pick()} for n in identities],
        "services": [{"name": n, "encryptionRequired": True, "roleAttributes": pick()} for n in services],
        "edgeRouters": [{"name": n, "roleAttributes": pick(), "isTunnelerEnabled": False} for n in routers],
        "servicePolicies": [{"name": f"sp{n}", "type": rng.choice(["Dial", "Bind"]),
                             "semantic": rng.choice(["AnyOf", "AllOf"]), "identityRoles": roles(identities),
                             "serviceRoles": roles(services)} for n in range(rng.randint(1, 5))],
        "edgeRouterPolicies": [{"name": f"erp{n}", "semantic": rng.choice(["AnyOf", "AllOf"]),
                                "identityRoles": roles(identities), "edgeRouterRoles": roles(routers)}
                               for n in range(rng.randint(0, 3))],
        "serviceEdgeRouterPolicies": [{"name": f"serp{n}", "semantic": rng.choice(["AnyOf", "AllOf"]),
                                       "serviceRoles": roles(services), "edgeRouterRoles": roles(routers)}
                                      for n in range(rng.randint(0, 3))],
    }


def ids(api, collection) -> dict[str, str]:
    return {e["name"]: e["id"] for e in api.list(collection)}


def names(api, path) -> set[str]:
    status, body = api.call("GET", path + ("&" if "?" in path else "?") + "limit=500")
    assert status == 200
    return {e["name"] for e in body["data"]}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_assertions_agree_with_the_relationship_lists(fresh_db, seed):
    rng = random.Random(seed)
    doc = random_network(rng)
    network = document.Network("random.json", doc)
    api = exchange.LocalApi(str(fresh_db))
    try:
        outcome = apply.apply_local(api, network, prune=True, dry_run=False, say=lambda s: None)
        assert outcome.applied
        identities, services, routers = ids(api, "identities"), ids(api, "services"), ids(api, "edge-routers")
        tests, expected = [], []
        for s, sid in services.items():
            # the reverse lists (service -> identities, router -> identities/services): other queries
            # than the ones the assertions make
            users = {a: names(api, f"/services/{sid}/identities?policyType={a}") for a in ("dial", "bind")}
            for i in (n for n in identities if n.startswith("i")):
                for a in ("dial", "bind"):
                    verb = rng.choice(["can", "cannot"])
                    tests.append({"identity": i, "service": s, verb: a})
                    expected.append((i in users[a]) == (verb == "can"))
                for r, rid in routers.items():
                    through = i in names(api, f"/edge-routers/{rid}/identities") and s in names(
                        api, f"/edge-routers/{rid}/services")
                    tests.append({"identity": i, "service": s, "router": r})
                    expected.append(i in users["dial"] and through)
        for i in (n for n in identities if n.startswith("i")):
            have = sorted(s for s, sid in services.items()
                          if i in names(api, f"/services/{sid}/identities?policyType=dial"))
            tests.append({"identity": i, "services": have})
            expected.append(True)
        assert [problem is None for problem in assertions.results(api, tests)] == expected
        assert len(tests) >= 14 and 0 < sum(expected)
    finally:
        api.close()
