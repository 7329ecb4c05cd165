"""The plan against random networks and random edits: it lists exactly the differences, and
applying the edited file (``--prune``) yields exactly the edited network."""

from __future__ import annotations

import copy
import json
import random

import pytest

from tests.netcode.test_assertions import random_network
from ziti_lite import exchange
from ziti_lite.netcode import apply, document, plan


def strip_refs(doc: dict, removed: str) -> None:
    for kind in ("servicePolicies", "edgeRouterPolicies", "serviceEdgeRouterPolicies"):
        for p in doc.get(kind, []):
            for field in exchange.ROLES[kind]:
                if field in p:
                    p[field] = [r for r in p[field] if r != "@" + removed]


def edit(rng: random.Random, doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(sorted(doc))
        rows = doc[kind]
        what = rng.choice(["remove", "add", "change"])
        if what == "remove" and rows:
            gone = rows.pop(rng.randrange(len(rows)))
            strip_refs(doc, gone["name"])
        elif what == "add" or not rows:
            template = copy.deepcopy(rng.choice(rows)) if rows else None
            if template is None:
                continue
            template["name"] = f"{template['name']}-new{rng.randint(0, 10**6)}"
            rows.append(template)
        else:
            row = rng.choice(rows)
            if "roleAttributes" in row:
                row["roleAttributes"] = sorted(set(row["roleAttributes"]) ^ {rng.choice("abcd")})
            else:
                row["semantic"] = "AllOf" if row["semantic"] == "AnyOf" else "AnyOf"
                if "type" in row and rng.random() < 0.5:
                    row["type"] = "Bind" if row["type"] == "Dial" else "Dial"
    return doc


def differences(before: dict, after: dict) -> set[tuple[str, str, str]]:
    out = set()
    for kind in after:
        old = {e["name"]: e for e in before.get(kind, [])}
        new = {e["name"]: e for e in after[kind]}
        out |= {("create", kind, n) for n in new.keys() - old.keys()}
        out |= {("delete", kind, n) for n in old.keys() - new.keys()}
        out |= {("update", kind, n) for n in new.keys() & old.keys()
                if any(plan.canonical(kind, k, v) != plan.canonical(kind, k, old[n].get(k))
                       for k, v in new[n].items())}
    return out


def shown(api, kind_rows: dict) -> dict:
    """The network's export, restricted to the kinds and fields a file gives."""
    current = exchange.export(api)
    out = {}
    for kind, rows in kind_rows.items():
        fields = {k for r in rows for k in r}
        out[kind] = sorted(({k: plan.canonical(kind, k, e.get(k)) for k in fields} for e in current[kind]),
                           key=lambda e: e["name"])
    return out


def canonical_doc(doc: dict) -> dict:
    return {kind: sorted(({k: plan.canonical(kind, k, v) for k, v in e.items()} for e in rows),
                         key=lambda e: e["name"])
            for kind, rows in doc.items()}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(15))
def test_applying_an_edit_makes_exactly_the_edited_network(fresh_db, seed):
    rng = random.Random(1000 + seed)
    first = random_network(rng)
    second = edit(rng, first)
    api = exchange.LocalApi(str(fresh_db))
    try:
        say = lambda s: None   # noqa: E731
        apply.apply_local(api, document.Network("a.json", copy.deepcopy(first)), True, False, say)
        assert shown(api, first) == canonical_doc(first)
        outcome = apply.apply_local(api, document.Network("b.json", copy.deepcopy(second)), True, False, say)
        planned = {(c.action, c.kind, c.name) for c in outcome.changes}
        assert planned == differences(first, second), json.dumps([first, second])
        assert outcome.applied == bool(planned)
        assert shown(api, second) == canonical_doc(second)
        again = apply.apply_local(api, document.Network("b.json", copy.deepcopy(second)), True, True, say)
        assert again.changes == []
    finally:
        api.close()
