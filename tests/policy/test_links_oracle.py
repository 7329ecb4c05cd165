"""The materialised policy links against an independent oracle.

Random sequences of creates, updates and deletes of identities, services, edge routers,
posture checks and the three kinds of policies go through the HTTP API; a small in-memory
model applies the same changes and evaluates every role list straight from the rules:

    an entity is selected by a role list when its id is named with @, or the list is #all,
    or the list has # attributes and (AllOf) the entity has all of them / (AnyOf) any of them;
    deleting an entity removes its @id from every role list.

After every step the membership tables must equal the oracle's answer; every few steps (and
at the end) the same is checked through the relationship endpoints, including the
identity<->service (Dial/Bind), identity<->edge router and service<->edge router joins.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

pytestmark = pytest.mark.slow   # an oracle over many generated networks

ATTRS = ["a", "b", "c", "d", "all"]
SIDE_COLLECTION = {"identity": "identities", "service": "services", "router": "edge-routers",
                   "posture-check": "posture-checks"}
KINDS = {  # kind -> (collection, {roles wire name: side})
    "sp": ("service-policies", {"identityRoles": "identity", "serviceRoles": "service",
                                "postureCheckRoles": "posture-check"}),
    "erp": ("edge-router-policies", {"identityRoles": "identity", "edgeRouterRoles": "router"}),
    "serp": ("service-edge-router-policies", {"serviceRoles": "service", "edgeRouterRoles": "router"}),
}
LINK_TABLES = {  # (kind, side) -> (table, entity column)
    ("sp", "identity"): ("service_policy_identities", "identity_id"),
    ("sp", "service"): ("service_policy_services", "service_id"),
    ("sp", "posture-check"): ("service_policy_posture_checks", "posture_check_id"),
    ("erp", "identity"): ("edge_router_policy_identities", "identity_id"),
    ("erp", "router"): ("edge_router_policy_routers", "router_id"),
    ("serp", "service"): ("service_edge_router_policy_services", "service_id"),
    ("serp", "router"): ("service_edge_router_policy_routers", "router_id"),
}


def selects(roles: list[str], semantic: str, entity_id: str, attrs: set[str]) -> bool:
    """The oracle: the rule as written in the reference, nothing shared with ziti_lite."""
    if "@" + entity_id in roles or "#all" in roles:
        return True
    wanted = {r[1:] for r in roles if r.startswith("#")}
    if not wanted:
        return False
    return wanted <= attrs if semantic == "AllOf" else bool(wanted & attrs)


@dataclass
class Policy:
    kind: str
    semantic: str
    roles: dict[str, list[str]]
    type: str = "Dial"
    system: bool = False


@dataclass
class Model:
    entities: dict[str, dict[str, set[str]]] = field(default_factory=lambda: {s: {} for s in SIDE_COLLECTION})
    policies: dict[str, Policy] = field(default_factory=dict)

    def members(self, pid: str, wire: str) -> set[str]:
        p = self.policies[pid]
        side = KINDS[p.kind][1][wire]
        return {e for e, attrs in self.entities[side].items() if selects(p.roles[wire], p.semantic, e, attrs)}

    def drop_entity(self, side: str, id: str) -> None:
        del self.entities[side][id]
        for p in self.policies.values():
            for wire, s in KINDS[p.kind][1].items():
                if s == side:
                    p.roles[wire] = [r for r in p.roles[wire] if r != "@" + id]

    def identity_services(self, iid: str, type: str | None) -> set[str]:
        out = set()
        for pid, p in self.policies.items():
            if p.kind == "sp" and (type is None or p.type == type) and iid in self.members(pid, "identityRoles"):
                out |= self.members(pid, "serviceRoles")
        return out

    def via(self, kind: str, from_wire: str, to_wire: str, id: str) -> set[str]:
        out = set()
        for pid, p in self.policies.items():
            if p.kind == kind and id in self.members(pid, from_wire):
                out |= self.members(pid, to_wire)
        return out


class Driver:
    def __init__(self, api, ctl, rnd: random.Random):
        self.api, self.ctl, self.rnd, self.m = api, ctl, rnd, Model()
        self.n = 0
        self.keep = set()
        for x in api.get("/identities", params={"limit": 500}).json()["data"]:  # the default admin
            self.m.entities["identity"][x["id"]] = set(x["roleAttributes"] or [])
            self.keep.add(x["id"])

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"

    def attrs(self) -> list[str]:
        return self.rnd.sample(ATTRS, self.rnd.randint(0, 3))

    def roles(self, side: str) -> list[str]:
        if self.rnd.random() < 0.12:
            return ["#all"]
        out = ["#" + a for a in self.rnd.sample(ATTRS[:4], self.rnd.randint(0, 2))]
        ids = list(self.m.entities[side])
        out += ["@" + i for i in self.rnd.sample(ids, min(len(ids), self.rnd.choice((0, 0, 1, 2))))]
        return out

    # ---------------------------------------------------------------- entities
    def create_entity(self, side: str) -> None:
        attrs = self.attrs()
        if side == "identity":
            body = {"name": self.name("id"), "type": "User", "isAdmin": False, "roleAttributes": attrs}
        elif side == "service":
            body = {"name": self.name("svc"), "encryptionRequired": True, "roleAttributes": attrs}
        elif side == "router":
            tunneler = self.rnd.random() < 0.3
            body = {"name": self.name("er"), "roleAttributes": attrs, "isTunnelerEnabled": tunneler}
        else:
            body = {"name": self.name("pc"), "typeId": "DOMAIN", "domains": ["example.com"], "roleAttributes": attrs}
        id = self.api.create(SIDE_COLLECTION[side], body)
        self.m.entities[side][id] = set(attrs)
        if side == "router" and body["isTunnelerEnabled"]:
            self.m.entities["identity"][id] = set()
            self.m.policies[id] = Policy("erp", "AnyOf", {"identityRoles": ["@" + id], "edgeRouterRoles": ["@" + id]},
                                         system=True)

    def update_entity(self, side: str) -> None:
        if not self.m.entities[side]:
            return self.create_entity(side)
        id = self.rnd.choice(sorted(self.m.entities[side]))
        if side == "identity" and self.rnd_router_identity(id):
            return
        attrs = self.attrs()
        body = {"roleAttributes": attrs}
        if side == "posture-check":
            body["typeId"] = "DOMAIN"
        r = self.api.patch(f"/{SIDE_COLLECTION[side]}/{id}", json=body)
        assert r.status_code == 200, r.text
        self.m.entities[side][id] = set(attrs)

    def rnd_router_identity(self, id: str) -> bool:
        return id in self.m.entities["router"] and id in self.m.policies

    def delete_entity(self, side: str) -> None:
        if not self.m.entities[side]:
            return
        id = self.rnd.choice(sorted(self.m.entities[side]))
        if side == "identity" and (self.rnd_router_identity(id) or id in self.keep):
            return  # a router's identity goes with its router; the default admin stays
        r = self.api.delete(f"/{SIDE_COLLECTION[side]}/{id}")
        assert r.status_code == 200, r.text
        self.m.drop_entity(side, id)
        if side == "router" and id in self.m.policies:
            del self.m.policies[id]
            self.m.drop_entity("identity", id)

    # ---------------------------------------------------------------- policies
    def policy_body(self, kind: str) -> tuple[dict, Policy]:
        sides = KINDS[kind][1]
        p = Policy(kind, self.rnd.choice(("AllOf", "AnyOf")), {w: self.roles(s) for w, s in sides.items()},
                   self.rnd.choice(("Dial", "Bind")))
        body = {"name": self.name(kind), "semantic": p.semantic, **p.roles}
        if kind == "sp":
            body["type"] = p.type
        return body, p

    def create_policy(self) -> None:
        kind = self.rnd.choice(list(KINDS))
        body, p = self.policy_body(kind)
        id = self.api.create(KINDS[kind][0], body)
        p.roles = {w: sorted(set(r)) for w, r in p.roles.items()}
        self.m.policies[id] = p

    def user_policies(self) -> list[str]:
        return sorted(pid for pid, p in self.m.policies.items() if not p.system)

    def update_policy(self) -> None:
        ids = self.user_policies()
        if not ids:
            return self.create_policy()
        pid = self.rnd.choice(ids)
        p = self.m.policies[pid]
        collection, sides = KINDS[p.kind]
        if self.rnd.random() < 0.3:  # PUT: everything replaced
            body, new = self.policy_body(p.kind)
            r = self.api.put(f"/{collection}/{pid}", json=body)
            assert r.status_code == 200, r.text
            new.roles = {w: sorted(set(r)) for w, r in new.roles.items()}
            self.m.policies[pid] = new
            return
        body = {}
        wire = self.rnd.choice(list(sides))
        if self.rnd.random() < 0.7:
            body[wire] = self.roles(sides[wire])
            p.roles[wire] = sorted(set(body[wire]))
        if self.rnd.random() < 0.4:
            p.semantic = body["semantic"] = self.rnd.choice(("AllOf", "AnyOf"))
        if p.kind == "sp" and self.rnd.random() < 0.3:
            p.type = body["type"] = self.rnd.choice(("Dial", "Bind"))
        r = self.api.patch(f"/{collection}/{pid}", json=body)
        assert r.status_code == 200, r.text

    def delete_policy(self) -> None:
        ids = self.user_policies()
        if ids:
            pid = self.rnd.choice(ids)
            assert self.api.delete(f"/{KINDS[self.m.policies[pid].kind][0]}/{pid}").status_code == 200
            del self.m.policies[pid]

    def step(self) -> None:
        side = self.rnd.choice(list(SIDE_COLLECTION))
        action = self.rnd.choices(
            [self.create_entity, self.update_entity, self.delete_entity, self.create_policy, self.update_policy,
             self.delete_policy], weights=[4, 3, 1, 4, 4, 1])[0]
        if action in (self.create_entity, self.update_entity, self.delete_entity):
            action(side)
        else:
            action()

    # ---------------------------------------------------------------- checks
    def check_tables(self) -> None:
        store = self.ctl.store
        for pid, p in self.m.policies.items():
            for wire, side in KINDS[p.kind][1].items():
                table, col = LINK_TABLES[(p.kind, side)]
                got = set(store.column(f"SELECT {col} FROM {table} WHERE policy_id = ?", (pid,)))
                assert got == self.m.members(pid, wire), (p, wire)
        for (kind, side), (table, col) in LINK_TABLES.items():
            n = store.value(f"SELECT count(*) FROM {table} WHERE policy_id NOT IN (SELECT value FROM json_each(?))",
                            (__import__("json").dumps(sorted(self.m.policies)),))
            assert n == 0, f"{table} has rows of deleted policies"
        for pid, (typ,) in ((pid, (p.type,)) for pid, p in self.m.policies.items() if p.kind == "sp"):
            types = set(store.column("SELECT type FROM service_policy_identities WHERE policy_id = ?"
                                     " UNION SELECT type FROM service_policy_services WHERE policy_id = ?", (pid, pid)))
            assert types <= {typ}

    def ids(self, path: str) -> set[str]:
        r = self.api.get(path + ("&" if "?" in path else "?") + "limit=500")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["meta"]["pagination"]["totalCount"] == len(body["data"])
        return {x["id"] for x in body["data"]}

    def check_api(self) -> None:
        for pid, p in self.m.policies.items():
            collection, sides = KINDS[p.kind]
            detail = self.api.get(f"/{collection}/{pid}").json()["data"]
            for wire, side in sides.items():
                assert detail[wire] == (p.roles[wire] or None)  # an empty role list reads null, as upstream
                assert self.ids(f"/{collection}/{pid}/{SIDE_COLLECTION[side]}") == self.m.members(pid, wire)
        for iid in self.m.entities["identity"]:
            assert self.ids(f"/identities/{iid}/services") == self.m.identity_services(iid, None)
            assert self.ids(f"/identities/{iid}/services?policyType=dial") == self.m.identity_services(iid, "Dial")
            assert self.ids(f"/identities/{iid}/services?policyType=BIND") == self.m.identity_services(iid, "Bind")
            expected = self.m.via("erp", "identityRoles", "edgeRouterRoles", iid)
            assert self.ids(f"/identities/{iid}/edge-routers") == expected
            want = {
                pid
                for pid, p in self.m.policies.items()
                if p.kind == "sp" and iid in self.m.members(pid, "identityRoles")
            }
            assert self.ids(f"/identities/{iid}/service-policies") == want
        for sid in self.m.entities["service"]:
            want = {i for i in self.m.entities["identity"] if sid in self.m.identity_services(i, "Dial")}
            assert self.ids(f"/services/{sid}/identities?policyType=dial") == want
            assert self.ids(f"/services/{sid}/edge-routers") == self.m.via(
                "serp", "serviceRoles", "edgeRouterRoles", sid
            )
        for rid in self.m.entities["router"]:
            assert self.ids(f"/edge-routers/{rid}/identities") == self.m.via(
                "erp", "edgeRouterRoles", "identityRoles", rid
            )
            assert self.ids(f"/edge-routers/{rid}/services") == self.m.via(
                "serp", "edgeRouterRoles", "serviceRoles", rid
            )


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_links_equal_oracle(bare, ctl, seed):
    admin = bare
    d = Driver(admin, ctl, random.Random(seed))
    for _ in range(4):  # a small population first
        for side in SIDE_COLLECTION:
            d.create_entity(side)
    for n in range(60):
        d.step()
        d.check_tables()
        if n % 15 == 14:
            d.check_api()
    d.check_api()


def test_rebuild_and_integrity_agree_with_oracle(bare, ctl):
    admin = bare
    """links.rebuild from scratch gives the same tables, and the integrity checks find nothing."""
    from ziti_lite import integrity
    from ziti_lite.policy import links

    d = Driver(admin, ctl, random.Random(99))
    for _ in range(3):
        for side in SIDE_COLLECTION:
            d.create_entity(side)
    for _ in range(25):
        d.step()
    assert [
        p.description for p in integrity.run(ctl.store) if "polic" in p.description or "role" in p.description
    ] == []
    with ctl.store.write():
        links.rebuild(ctl.store)
    d.check_tables()
    d.check_api()
