"""The two role evaluators (``matches`` for one entity, ``member_sql`` for all of them) and the
roleFilter condition, against oracles written from the rules, on generated data."""

from __future__ import annotations

import json

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ziti_lite.errors import CouldNotValidate
from ziti_lite.policy import evaluate
from ziti_lite.policy.model import IDENTITY

ATTR = st.sampled_from(["a", "b", "c", "all"])
IDS = [f"e{n}" for n in range(6)]
ENTITIES = st.dictionaries(st.sampled_from(IDS), st.sets(ATTR, max_size=3), max_size=6)
ROLE = st.one_of(ATTR.map(lambda a: "#" + a), st.sampled_from(IDS + ["missing"]).map(lambda i: "@" + i))
ROLES = st.one_of(st.just(["#all"]), st.lists(ROLE.filter(lambda r: r != "#all"), max_size=4, unique=True))
SEMANTIC = st.sampled_from(["AllOf", "AnyOf"])


def oracle(roles, semantic, id, attrs) -> bool:
    if "@" + id in roles or "#all" in roles:
        return True
    want = {r[1:] for r in roles if r[0] == "#"}
    return bool(want) and (want <= attrs if semantic == "AllOf" else bool(want & attrs))


def role_filter_oracle(values, semantic, id, attrs) -> bool:
    want = {v[1:] for v in values if v[0] == "#"}
    by_attr = bool(want) and (want <= attrs if semantic.lower() == "allof" else bool(want & attrs))
    return by_attr or "@" + id in values


def db(entities: dict) -> apsw.Connection:
    c = apsw.Connection(":memory:")
    c.execute("CREATE TABLE identities (id TEXT PRIMARY KEY, role_attributes TEXT);"
              "CREATE TABLE entity_role_attributes (kind TEXT, attribute TEXT, entity_id TEXT,"
              " PRIMARY KEY (kind, attribute, entity_id))")
    for id, attrs in entities.items():
        c.execute("INSERT INTO identities VALUES (?, ?)", (id, json.dumps(sorted(attrs))))
        for a in attrs:
            c.execute("INSERT INTO entity_role_attributes VALUES ('identity', ?, ?)", (a, id))
    return c


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(ENTITIES, ROLES, SEMANTIC)
def test_member_sql_and_matches_agree_with_oracle(entities, roles, semantic):
    want = {id for id, attrs in entities.items() if oracle(roles, semantic, id, attrs)}
    assert {id for id, attrs in entities.items() if evaluate.matches(id, attrs, roles, semantic)} == want
    sql, params = evaluate.member_sql(IDENTITY, roles, semantic)
    assert {r[0] for r in db(entities).execute(sql, params)} == want


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(ENTITIES, st.lists(ROLE, min_size=1, max_size=4), st.sampled_from(["AllOf", "anyof", "ANYOF", ""]))
def test_role_filter_agrees_with_oracle(entities, values, semantic):
    where, params = evaluate.role_filter_sql(IDENTITY, values, semantic)
    got = {r[0] for r in db(entities).execute(f"SELECT t.id FROM identities t WHERE {where}", params)}
    assert got == {id for id, attrs in entities.items() if role_filter_oracle(values, semantic or "AllOf", id, attrs)}


def test_validate():
    assert evaluate.validate("identityRoles", ["#b", "@x", "#a", "#b"]) == ["#a", "#b", "@x"]
    assert evaluate.validate("identityRoles", ["#all"]) == ["#all"]
    assert evaluate.validate("identityRoles", []) == []
    for bad in (["#all", "#all"], ["#all", "@x"], ["x"], ["#a", ""]):
        with pytest.raises(CouldNotValidate):
            evaluate.validate("identityRoles", bad)
