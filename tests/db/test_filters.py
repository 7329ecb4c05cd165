"""ZitiQL → SQL: results checked against an independent pure-Python evaluator on a real SQLite table."""

from __future__ import annotations

import datetime as dt
import json
import random
import string
import sys
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    import ziti_lite  # noqa: F401
except ImportError:  # running without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.test_zitiql import render  # AST -> filter text, the parser tests' own renderer
from ziti_lite import zitiql as z
from ziti_lite.db import filters as f
from ziti_lite.db.filters import UNLIMITED_META, FilterError, PagingError, SortError, Symbol, compile_query, paging
from ziti_lite.zitiql import (
    And,
    BareSymbol,
    Between,
    BoolLiteral,
    Compare,
    In,
    IsEmpty,
    Not,
    Or,
    ParseError,
    Query,
    Ref,
    SetFunction,
    parse,
)

UTC = dt.UTC

# ====================================================================== fixture data
SYMBOLS: f.Symbols = {
    "id": Symbol("string", "t.id"),
    "name": Symbol("string", "t.name"),
    "kind": Symbol("string", "t.kind"),                 # nullable
    "num": Symbol("int", "t.num"),                      # nullable
    "score": Symbol("float", "t.score"),
    "flag": Symbol("bool", "t.flag"),
    "createdAt": Symbol("datetime", "t.created_at"),
    "updatedAt": Symbol("datetime", "t.updated_at"),    # nullable
    "roleAttributes": Symbol("set", "SELECT value FROM json_each(t.role_attributes)"),
    "tags": Symbol("tags", "t.tags"),
    "parent.name": Symbol("string", "(SELECT p.name FROM parents p WHERE p.id = t.parent_id)"),
    "isSystem": Symbol("bool", "t.is_system"),
}
SCALAR_KINDS = {n: s.kind for n, s in SYMBOLS.items() if s.kind not in ("set", "tags")}

NAMES = ["alpha", "Alpha", "ALPHA-2", "beta", "beta", "gamma ray", "delta", "épée", 'x"q', "", "αβγ",
         "web", "WEB-host", "a\\b", "5", "10", "zeta", "tab\there"]
KINDS = [None, "a", "b", "c", "Ab"]
ROLES = ["demo", "echo", "legacy", "Web", "web-host", "5"]
TAG_KEYS = ["env", "foo", "n", "b", "x-y"]
TAG_VALUES = ["prod", "stage", "Bar", "", "5", 1, 2.5, -3, 0, True, False, None]
PARENTS = {"p1": "one", "p2": "Two", "p3": "three"}
BASE = dt.datetime(2024, 1, 1, tzinfo=UTC)
MS = dt.timedelta(milliseconds=1)


def fmt_dt(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def make_rows(n=90, seed=1234):
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        created = BASE + dt.timedelta(milliseconds=rnd.choice(
            [0, 1, 999, 1000, -1, rnd.randrange(-10 ** 10, 10 ** 10)]))
        tags = {k: rnd.choice(TAG_VALUES) for k in rnd.sample(TAG_KEYS, rnd.randrange(0, 4))}
        if rnd.random() < 0.2:
            tags["a"] = {"b": rnd.choice(["c", "d", 7])}
        rows.append({
            "id": f"id{i:03d}{rnd.choice('ABCxyz')}",
            "name": rnd.choice(NAMES),
            "kind": rnd.choice(KINDS),
            "num": rnd.choice([None, -3, 0, 1, 2, 5, 10, 7]),
            "score": rnd.choice([-1.5, 0.0, 0.25, 3.0, 10.5, 5.0]),
            "flag": rnd.random() < 0.5,
            "created": created,
            "updated": None if rnd.random() < 0.2 else created + dt.timedelta(seconds=rnd.randrange(0, 10 ** 6)),
            "roles": rnd.sample(ROLES, rnd.randrange(0, 4)),
            "tags": tags,
            "parent": rnd.choice([None, "p1", "p2", "p3", "gone"]),
            "system": rnd.random() < 0.1,
        })
    return rows


ROWS = make_rows()


@pytest.fixture(scope="module")
def items_db():
    """The production driver (apsw) on an in-memory database."""
    conn = apsw.Connection(":memory:")
    conn.execute("""
        CREATE TABLE parents (id TEXT PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE items (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT, num INTEGER, score REAL NOT NULL,
            flag INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT,
            role_attributes TEXT NOT NULL, tags TEXT NOT NULL, parent_id TEXT,
            is_system INTEGER NOT NULL) STRICT;
    """)
    conn.executemany("INSERT INTO parents VALUES (?, ?)", list(PARENTS.items()))
    conn.executemany("INSERT INTO items VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [
        (r["id"], r["name"], r["kind"], r["num"], r["score"], int(r["flag"]), fmt_dt(r["created"]),
         r["updated"] and fmt_dt(r["updated"]), json.dumps(r["roles"]), json.dumps(r["tags"]),
         r["parent"], int(r["system"])) for r in ROWS])
    yield conn
    conn.close()


def run(conn, q: Query | str, symbols=SYMBOLS):
    if isinstance(q, str):
        q = parse(q)
    c = compile_query(q, symbols)
    sql = f"SELECT t.id FROM items t WHERE {c.where} ORDER BY {c.order_by}"
    assert sql.count("?") == len(c.params)
    return [r[0] for r in conn.execute(sql, c.params)], c


# ====================================================================== the oracle
MISSING = object()


def ascii_upper(s: str) -> str:
    return "".join(chr(ord(ch) - 32) if "a" <= ch <= "z" else ch for ch in s)


def num_text(v) -> str:
    return f._num_text(v) if isinstance(v, float) else str(v)


def scalar(row, name):
    """(kind, value) of a scalar symbol; value None when missing."""
    if name == "parent.name":
        return "string", PARENTS.get(row["parent"])
    col = {"id": "id", "name": "name", "kind": "kind", "num": "num", "score": "score", "flag": "flag",
           "createdAt": "created", "updatedAt": "updated", "isSystem": "system"}[name]
    return SCALAR_KINDS[name], row[col]


def tag_value(row, name):
    v = row["tags"]
    for key in name.split(".")[1:]:
        if not isinstance(v, dict) or key not in v:
            return None
        v = v[key]
    return v


def lit_kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "datetime"


def apply_op(kind, value, op, lit) -> bool:
    """`value op lit` for a non-missing value of `kind` (already checked to be type-compatible)."""
    if kind == "string" and isinstance(lit, (int, float)) and not isinstance(lit, bool):
        lit = num_text(lit)
    if op == "=":
        return value == lit
    if op == "!=":
        return value != lit
    if op == "<":
        return value < lit
    if op == "<=":
        return value <= lit
    if op == ">":
        return value > lit
    if op == ">=":
        return value >= lit
    if op == "contains":
        return lit in value
    if op == "not contains":
        return lit not in value
    if op == "icontains":
        return ascii_upper(lit) in ascii_upper(value)
    if op == "not icontains":
        return ascii_upper(lit) not in ascii_upper(value)
    raise AssertionError(op)


def eval_on(kind, value, n) -> bool:
    """Evaluate Compare/In/Between on a value (None = missing → false)."""
    if value is None:
        return False
    if isinstance(n, Compare):
        return apply_op(kind, value, n.op, n.value)
    if isinstance(n, In):
        lits = [num_text(v) if kind == "string" and lit_kind(v) == "number" else v for v in n.values]
        return (value not in lits) if n.negated else (value in lits)
    lo, hi = n.low, n.high
    if kind == "string":
        lo, hi = (num_text(v) if lit_kind(v) == "number" else v for v in (lo, hi))
    inside = lo <= value <= hi
    return not inside if n.negated else inside


def literals(n):
    return [n.value] if isinstance(n, Compare) else list(n.values) if isinstance(n, In) else [n.low, n.high]


def evaluate(n, row) -> bool:
    if isinstance(n, And):
        return evaluate(n.left, row) and evaluate(n.right, row)
    if isinstance(n, Or):
        return evaluate(n.left, row) or evaluate(n.right, row)
    if isinstance(n, Not):
        return not evaluate(n.expr, row)
    if isinstance(n, BoolLiteral):
        return n.value
    if isinstance(n, BareSymbol):
        if n.name.startswith("tags."):
            return tag_value(row, n.name) is True
        return scalar(row, n.name)[1] is True
    if isinstance(n, IsEmpty):
        return not row["roles"]
    lhs = n.lhs
    if isinstance(lhs, SetFunction):
        if lhs.func == "count":
            return eval_on("int", len(row["roles"]), n)
        results = [eval_on("string", e, n) for e in row["roles"]]
        return any(results) if lhs.func == "anyOf" else all(results)
    if lhs.name.startswith("tags."):
        v = tag_value(row, lhs.name)
        lk = lit_kind(literals(n)[0])
        if lk == "null":
            return (v is None) == (n.op == "=")
        if lk == "bool":
            return isinstance(v, bool) and (v == n.value) == (n.op == "=")
        if isinstance(n, Compare) and "contains" in n.op:
            lk = "string"
        if lk == "string":
            return isinstance(v, str) and eval_on("string", v, n)
        if lk == "number":
            return isinstance(v, (int, float)) and not isinstance(v, bool) and eval_on("float", v, n)
        raise AssertionError(lk)
    kind, v = scalar(row, lhs.name)
    if isinstance(n, Compare) and n.value is None:
        return (v is None) == (n.op == "=")
    return eval_on(kind, v, n)


def expected_ids(q: Query | str):
    if isinstance(q, str):
        q = parse(q)
    if q.predicate is None:
        return sorted(r["id"] for r in ROWS)
    return sorted(r["id"] for r in ROWS if evaluate(q.predicate, r))


# ====================================================================== example filters
D = "datetime(2024-01-01T00:00:00Z)"
FILTERS = [
    'name = "alpha"',
    'name != "alpha"',
    'name = "Alpha"',
    'name < "beta"',
    'name >= "beta"',
    'name > "Z"',
    'name contains "lph"',
    'name contains "LPH"',
    'name icontains "LPH"',
    'name icontains "ÉPÉE"',                # SQLite upper() is ASCII-only: no match expected
    'name not contains "a"',
    'name not icontains "A"',
    'name contains ""',
    'name = ""',
    'name contains "\\""',
    'name contains "\\\\"',
    'name contains "\\t"',
    "name = 5",
    "name = 10",
    "name > 4",
    "name contains 5",
    'name in ["alpha", "beta", "nope"]',
    'name not in ["alpha", "beta"]',
    "name in [5, 10]",
    "name between 1 and 6",
    'kind = "a"',
    'kind != "a"',
    "kind = null",
    "kind != null",
    'not kind = "a"',
    'not kind != "a"',
    'kind not in ["a"]',
    'not kind in ["a"]',
    'kind not contains "A"',
    'not (kind contains "b")',
    'kind icontains "a"',
    "num = 5",
    "num != 5",
    "num > 1",
    "num >= 1.5",
    "num < 0",
    "num = null",
    "num != null",
    "not num > 1",
    "num in [0, 1, 2]",
    "num not in [0, 1, 2]",
    "num between 0 and 5",
    "num not between 0 and 5",
    "not num between 0 and 5",
    "score = 3",
    "score > 0.25",
    "score between -1.5 and 3",
    "score in [0, 10.5]",
    "flag = true",
    "flag = false",
    "flag != true",
    "flag",
    "not flag",
    "isSystem = true",
    f"createdAt = {D}",
    f"createdAt != {D}",
    f"createdAt > {D}",
    f"createdAt >= {D}",
    f"createdAt < {D}",
    f"createdAt <= {D}",
    "createdAt > datetime(2024-01-01T00:00:00.0005Z)",
    "createdAt >= datetime(2024-01-01T00:00:00.0005Z)",
    "createdAt < datetime(2024-01-01T00:00:00.0015Z)",
    "createdAt <= datetime(2024-01-01T00:00:00.0015Z)",
    "createdAt = datetime(2024-01-01T00:00:00.0005Z)",
    "createdAt != datetime(2024-01-01T00:00:00.0005Z)",
    "createdAt = datetime(2024-01-01T01:00:00.001+01:00)",
    "createdAt between datetime(2023-12-31T23:59:59.9995Z) and datetime(2024-01-01T00:00:00.0015Z)",
    "createdAt not between datetime(2023-12-31T23:59:59.9995Z) and datetime(2024-01-01T00:00:00.0015Z)",
    f"createdAt in [{D}, datetime(2024-01-01T00:00:00.0005Z)]",
    "createdAt in [datetime(2024-01-01T00:00:00.0005Z)]",
    "createdAt not in [datetime(2024-01-01T00:00:00.0005Z)]",
    "updatedAt = null",
    f"updatedAt > {D}",
    f"not updatedAt > {D}",
    'parent.name = "one"',
    'parent.name != "one"',
    "parent.name = null",
    'parent.name icontains "T"',
    'anyOf(roleAttributes) = "demo"',
    'anyOf(roleAttributes) != "demo"',
    'allOf(roleAttributes) != "legacy"',
    'allOf(roleAttributes) = "demo"',
    'anyOf(roleAttributes) contains "e"',
    'anyOf(roleAttributes) icontains "WEB"',
    'allOf(roleAttributes) not contains "o"',
    'anyOf(roleAttributes) in ["echo", "legacy"]',
    'allOf(roleAttributes) not in ["echo", "legacy"]',
    "anyOf(roleAttributes) = 5",
    'anyOf(roleAttributes) < "e"',
    'not anyOf(roleAttributes) = "demo"',
    "count(roleAttributes) > 1",
    "count(roleAttributes) = 0",
    "count(roleAttributes) between 1 and 2",
    "count(roleAttributes) in [0, 3]",
    "isEmpty(roleAttributes)",
    "not isEmpty(roleAttributes)",
    'tags.env = "prod"',
    'tags.env != "prod"',
    'not tags.env = "prod"',
    "tags.env = null",
    "tags.env != null",
    'tags.env contains "r"',
    'tags.env not contains "r"',
    'tags.env icontains "BA"',
    'tags.env in ["prod", "stage"]',
    'tags.env < "q"',
    "tags.n = 1",
    "tags.n > 0",
    "tags.n between -3 and 1",
    "tags.n in [2.5, -3]",
    "tags.n = true",
    "tags.n != true",
    "tags.n = false",
    "tags.n != false",
    "tags.n",
    "not tags.n",
    "tags.n contains 5",
    'tags.n = "5"',
    'tags.x-y = "Bar"',
    'tags.a.b = "c"',
    "tags.a.b = 7",
    "tags.a = null",
    "tags.nothing = null",
    '(id = "web" or name = "web") and tags.foo != null',
    'name = "alpha" and not (tags.env = "prod" or tags.env = "stage")',
    "flag and num > 1 or kind = null",
    "not flag and num > 1 or kind = null",
    "(not flag and num > 1) or kind = null",
    "true",
    "false",
    "not true",
    "true or false and false",
    "skip 3 limit 2",
    'name contains "a" sort by name desc limit 5',
]


@pytest.mark.parametrize("text", FILTERS)
def test_filters_match_oracle(items_db, text):
    got, _ = run(items_db, text)
    assert sorted(got) == expected_ids(text), text


def test_the_examples_are_selective(items_db):
    """Most example filters should select some rows but not all (else they prove little)."""
    interesting = 0
    for text in FILTERS:
        n = len(expected_ids(text))
        interesting += 0 < n < len(ROWS)
    assert interesting > len(FILTERS) * 0.75


def test_ascii_only_icontains_documented(items_db):
    got, _ = run(items_db, 'name icontains "épée"')
    assert got and all(ROWS_BY_ID[i]["name"] == "épée" for i in got)


ROWS_BY_ID = {r["id"]: r for r in ROWS}


# ====================================================================== SQL shape
def test_empty_query_compiles_to_true():
    c = compile_query(Query(None, (), None, None), SYMBOLS)
    assert (c.where, c.params, c.order_by, c.skip, c.limit) == ("1", [], "t.id ASC", None, None)


def test_skip_limit_pass_through():
    c = compile_query(parse("true skip 5 limit none"), SYMBOLS)
    assert (c.skip, c.limit) == (5, -1)


def test_contains_uses_instr_not_like():
    c = compile_query(parse('name contains "a%_" and name icontains "b"'), SYMBOLS)
    assert "LIKE" not in c.where.upper()
    assert "instr(t.name, ?)" in c.where and "instr(upper(t.name), upper(?))" in c.where
    assert c.params == ["a%_", "b"]


def test_like_wildcards_are_literal(items_db):
    got, _ = run(items_db, 'name contains "%"')
    assert got == []


def test_tag_key_is_a_parameter():
    c = compile_query(parse('tags.x-y = "v"'), SYMBOLS)
    assert "x-y" not in c.where
    assert '$."x-y"' in c.params


def test_datetime_literal_normalised_to_storage_format():
    c = compile_query(parse("createdAt > datetime(2024-06-01T02:00:00.5+02:00)"), SYMBOLS)
    assert c.params == ["2024-06-01T00:00:00.500Z"]


def test_null_tests():
    assert compile_query(parse("kind = null"), SYMBOLS).where == "(t.kind IS NULL)"
    assert compile_query(parse("kind != null"), SYMBOLS).where == "(t.kind IS NOT NULL)"


def test_number_converted_to_text_for_string_symbols():
    assert compile_query(parse("name = 5"), SYMBOLS).params == ["5"]
    assert compile_query(parse("name in [1, 2.5, 1e3]"), SYMBOLS).params == ["1", "2.5", "1000"]


# ====================================================================== sorting
SORTS = [
    ("sort by name", [("name", True)]),
    ("sort by name desc", [("name", False)]),
    ("sort by score desc, name asc", [("score", False), ("name", True)]),
    ("sort by flag, createdAt desc", [("flag", True), ("created", False)]),
    ("sort by id desc", [("id", False)]),
    ("sort by parent.name", None),
]


@pytest.mark.parametrize("text,keys", SORTS)
def test_sort(items_db, text, keys):
    got, c = run(items_db, text)
    if keys is None:
        assert c.order_by == "(SELECT p.name FROM parents p WHERE p.id = t.parent_id) ASC, t.id ASC"
        return
    rows = sorted(ROWS, key=lambda r: r["id"])
    for col, asc in reversed(keys):
        rows.sort(key=lambda r: r[col], reverse=not asc)
    assert got == [r["id"] for r in rows]


def test_order_by_text():
    assert compile_query(parse("sort by name desc, score"), SYMBOLS).order_by == "t.name DESC, t.score ASC, t.id ASC"
    assert compile_query(parse("sort by id desc"), SYMBOLS).order_by == "t.id DESC"
    assert compile_query(parse("true"), SYMBOLS, default_sort="t.rowid").order_by == "t.rowid ASC"


def test_at_most_five_sort_fields():
    c = compile_query(parse("sort by name, kind, num, score, flag, createdAt desc"), SYMBOLS)
    assert c.order_by == "t.name ASC, t.kind ASC, t.num ASC, t.score ASC, t.flag ASC, t.id ASC"
    # the ignored sixth field is not even checked
    compile_query(parse("sort by name, kind, num, score, flag, roleAttributes"), SYMBOLS)


@pytest.mark.parametrize("text", ["sort by roleAttributes", "sort by tags", "sort by tags.env",
                                  "sort by nope", "true sort by name, nope"])
def test_bad_sort_fields(text):
    with pytest.raises(SortError):
        compile_query(parse(text), SYMBOLS)


# ====================================================================== typing errors
FILTER_ERRORS = [
    ('flag = "true"', "operation"),
    ("flag = 1", "operation"),
    (Compare(Ref("flag"), ">", True), "operation"),     # not expressible as text
    ("flag < 1", "operation"),
    ("flag in [1]", "operation"),
    ("flag between 0 and 1", "operation"),
    ('createdAt > "2024"', "operation"),
    ("createdAt > 2024", "operation"),
    ('createdAt contains "2024"', "operation"),
    ("name = true", "operation"),
    (f"name > {D}", "operation"),
    ('num = "5"', "operation"),
    ('num contains "5"', "operation"),
    ("num contains 5", "operation"),
    ('num icontains "5"', "operation"),
    ('score in ["a"]', "operation"),
    ("name", "can not be used as a boolean"),
    ("num", "can not be used as a boolean"),
    ("roleAttributes", "set symbol but is used in non-set function context"),
    ('roleAttributes = "a"', "set symbol but is used in non-set function context"),
    ('roleAttributes contains "a"', "set symbol but is used in non-set function context"),
    ("roleAttributes = null", "set symbol but is used in non-set function context"),
    ('tags = "a"', "map"),
    ("tags = null", "map"),
    ('anyOf(name) = "a"', "not a set symbol"),
    ('allOf(tags.x) = "a"', "not a set symbol"),
    ("count(num) > 1", "not a set symbol"),
    ("isEmpty(name)", "not a set symbol"),
    ("anyOf(roleAttributes) = true", "operation"),
    ("anyOf(roleAttributes) = null", "operation"),
    (f"anyOf(roleAttributes) = {D}", "operation"),
    ('count(roleAttributes) > "1"', "operation"),
    ('count(roleAttributes) contains "1"', "operation"),
    ("count(roleAttributes) = null", "operation"),
    (Compare(Ref("tags.n"), ">", True), "operation"),
    (Compare(Ref("tags.n"), "<", None), "operation"),
    (Compare(Ref("name"), "contains", None), "operation"),
    (In(Ref("tags.n"), ("a", 1)), "mixed"),
    (Compare(Ref("name"), "==", "a"), "unknown operator"),
    (Compare(Ref("num"), "=", float("nan")), "invalid number"),
    ('foo = "a"', "unknown symbol 'foo'"),
    ("foo", "unknown symbol 'foo'"),
    ('Name = "a"', "unknown symbol 'Name'"),
    ("'name' = \"a\"", "unknown symbol ''name''"),
    ("'tags.env' = \"a\"", "unknown symbol ''tags.env''"),
    ('anyOf(nope) = "a"', "unknown symbol 'nope'"),
    ("isEmpty(nope)", "unknown symbol 'nope'"),
    ('name.x = "a"', "unknown symbol 'name.x'"),
    ('parent.nope = "a"', "unknown symbol 'parent.nope'"),
    ('count(from servicePolicies where anyOf(identities) = "x") > 0', "unknown symbol 'servicePolicies'"),
    ('isEmpty(from roleAttributes where name = "x")', "sub-queries are not supported"),
    ('name = "a" and (flag or nope = 1)', "unknown symbol 'nope'"),
]


@pytest.mark.parametrize("text,message", FILTER_ERRORS, ids=[str(t) for t, _ in FILTER_ERRORS])
def test_filter_errors(text, message):
    q = parse(text) if isinstance(text, str) else Query(text, (), None, None)
    with pytest.raises(FilterError) as info:
        compile_query(q, SYMBOLS)
    assert message in str(info.value)


def test_errors_are_value_errors_and_distinct():
    for cls in (FilterError, SortError, PagingError):
        assert issubclass(cls, ValueError)
    assert not issubclass(SortError, FilterError) and not issubclass(FilterError, SortError)


def test_datetime_out_of_range_is_a_filter_error():
    with pytest.raises(FilterError):
        compile_query(parse("createdAt > datetime(0001-01-01T00:00:00+01:00)"), SYMBOLS)


# ====================================================================== paging
PAGING = [
    # filter_skip, filter_limit, param_limit, param_offset, expected (limit, offset)
    (None, None, None, None, (10, 0)),
    (None, None, "", "", (10, 0)),
    (None, None, "50", "20", (50, 20)),
    (None, None, "0", None, (10, 0)),
    (None, None, "-2", None, (10, 0)),
    (None, None, "-1", None, (-1, 0)),
    (None, None, "501", None, (500, 0)),
    (None, None, "500", None, (500, 0)),
    (None, None, "+7", "+3", (7, 3)),
    (None, None, None, "-5", (10, 0)),
    (None, None, None, "100001", (10, 100000)),
    (None, None, None, "100000", (10, 100000)),
    (5, 2, "50", "0", (2, 5)),
    (5, None, "50", "0", (50, 5)),
    (None, 2, "50", "7", (2, 7)),
    (None, -1, "50", None, (-1, 0)),
    (-3, 0, None, None, (10, 0)),
    (10 ** 9, 10 ** 9, None, None, (500, 100000)),
]


@pytest.mark.parametrize("fs,fl,pl,po,expected", PAGING)
def test_paging(fs, fl, pl, po, expected):
    page = paging(fs, fl, pl, po)
    assert tuple(page) == expected
    assert (page.limit, page.offset) == expected


def test_params_are_validated_even_when_the_filter_wins():
    with pytest.raises(PagingError):
        paging(5, 2, "junk", None)


@pytest.mark.parametrize("pl,po", [("abc", None), (None, "1.5"), ("10 ", None), (" 10", None),
                                   ("none", None), ("1e3", None), (None, "9223372036854775808"),
                                   ("0x10", None), ("١٢", None)])
def test_paging_errors(pl, po):
    with pytest.raises(PagingError):
        paging(None, None, pl, po)


def test_unlimited_meta():
    assert UNLIMITED_META == 2 ** 63 - 1


def test_paging_from_filter_text(items_db):
    q = parse('name contains "a" skip 5 limit 2')
    c = compile_query(q, SYMBOLS)
    limit, offset = paging(c.skip, c.limit, "50", "0")
    ids = [r[0] for r in items_db.execute(
        f"SELECT t.id FROM items t WHERE {c.where} ORDER BY {c.order_by} LIMIT ? OFFSET ?",
        [*c.params, limit, offset])]
    assert ids == expected_ids(q)[5:7]


# ====================================================================== property tests
def _str_lits():
    return st.one_of(st.sampled_from(NAMES + ROLES + ["a", "b", "A", "e", "prod", "Bar", "5", "r"]),
                     st.text(alphabet="abAB5 -é\"\\", max_size=3))


NUM_LITS = st.one_of(st.sampled_from([-3, 0, 1, 2, 2.5, 5, 7, 10, 10.5, -1.5, 0.25]),
                     st.integers(-20, 20), st.floats(-20, 20, allow_nan=False))
DT_LITS = st.one_of(
    st.sampled_from([BASE, BASE + MS, BASE - MS, BASE + MS / 2, BASE - MS / 2, BASE + 1000 * MS]),
    st.integers(-10 ** 10, 10 ** 10).map(lambda ms: BASE + ms * MS),
    st.integers(-10 ** 13, 10 ** 13).map(lambda us: BASE + dt.timedelta(microseconds=us)),
).flatmap(lambda t: st.sampled_from([t, t.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30))),
                                     t.astimezone(dt.timezone(dt.timedelta(hours=-8)))]))
CMP_OPS = ["=", "!=", "<", "<=", ">", ">="]
TEXT_OPS = ["contains", "not contains", "icontains", "not icontains"]


def ops_for(lhs, lits, null_ok=True, bool_lits=False, text=False, ordered=True):
    """Compare/In/Between over `lhs` with literals from `lits`."""
    options = [
        st.builds(Compare, st.just(lhs), st.sampled_from(CMP_OPS if ordered else ["=", "!="]), lits),
        st.builds(In, st.just(lhs), st.lists(lits, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(Between, st.just(lhs), lits, lits, st.booleans()),
    ]
    if text:
        options.append(st.builds(Compare, st.just(lhs), st.sampled_from(TEXT_OPS), _str_lits()))
    if null_ok:
        options.append(st.builds(Compare, st.just(lhs), st.sampled_from(["=", "!="]), st.none()))
    return options


def leaf_strategy():
    opts = []
    for name in ("id", "name", "kind", "parent.name"):
        opts += ops_for(Ref(name), st.one_of(_str_lits(), NUM_LITS), text=True)
    for name in ("num", "score"):
        opts += ops_for(Ref(name), NUM_LITS)
    for name in ("createdAt", "updatedAt"):
        opts += ops_for(Ref(name), DT_LITS)
    for name in ("flag", "isSystem"):
        opts.append(st.builds(Compare, st.just(Ref(name)), st.sampled_from(["=", "!="]),
                              st.one_of(st.booleans(), st.none())))
        opts.append(st.just(BareSymbol(name)))
    for func in ("anyOf", "allOf"):
        opts += ops_for(SetFunction(func, "roleAttributes"), st.one_of(_str_lits(), NUM_LITS),
                        null_ok=False, text=True)
    opts += ops_for(SetFunction("count", "roleAttributes"), st.integers(-1, 4), null_ok=False)
    opts.append(st.just(IsEmpty("roleAttributes")))
    tag_names = st.sampled_from(["tags.env", "tags.foo", "tags.n", "tags.b", "tags.x-y", "tags.a.b",
                                 "tags.a", "tags.zz"])
    for lits in (_str_lits(), NUM_LITS):
        opts.append(tag_names.flatmap(lambda t, lits=lits: st.one_of(
            *ops_for(Ref(t), lits, text=True))))
    opts.append(tag_names.flatmap(lambda t: st.builds(Compare, st.just(Ref(t)), st.sampled_from(["=", "!="]),
                                                      st.booleans())))
    opts.append(tag_names.map(BareSymbol))
    opts.append(st.builds(BoolLiteral, st.booleans()))
    return st.one_of(*opts)


PREDICATES = st.recursive(leaf_strategy(), lambda inner: st.one_of(
    st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)), max_leaves=6)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREDICATES)
def test_random_predicates_match_oracle(items_db, pred):
    q = Query(pred, (), None, None)
    got, c = run(items_db, q)
    assert sorted(got) == expected_ids(q), (pred, c.where, c.params)


def textual(n) -> bool:
    """Whether the grammar can express `n` (between takes numbers/datetimes, in a one-kind list)."""
    if isinstance(n, (And, Or)):
        return textual(n.left) and textual(n.right)
    if isinstance(n, Not):
        return textual(n.expr)
    if isinstance(n, Between):
        return len({lit_kind(n.low), lit_kind(n.high)}) == 1 and lit_kind(n.low) in ("number", "datetime")
    if isinstance(n, In):
        return len({lit_kind(v) for v in n.values}) == 1
    if isinstance(n, Compare) and n.op in ("<", "<=", ">", ">="):
        return lit_kind(n.value) in ("string", "number", "datetime")
    if isinstance(n, Compare) and "icontains" in n.op:
        return lit_kind(n.value) == "string"
    return True


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREDICATES.filter(textual))
def test_random_predicates_survive_text_roundtrip(items_db, pred):
    """The same predicates, written as filter text and parsed back."""
    text = render(pred)
    assert parse(text).predicate == pred, text
    got, _ = run(items_db, text)
    assert sorted(got) == expected_ids(Query(pred, (), None, None)), text


# -- robustness: arbitrary text gives only our three errors, and valid SQL otherwise
SOUP = ["name", "kind", "num", "flag", "createdAt", "tags.env", "tags.n", "roleAttributes", "nope",
        "anyOf(roleAttributes)", "allOf(roleAttributes)", "count(roleAttributes)", "isEmpty(roleAttributes)",
        "(", ")", " ", " = ", " != ", " < ", " >= ", " and ", " or ", "not ", " in ", " not in ",
        " between ", " contains ", " icontains ", '"a"', '"QZX\\"1"', "1", "2.5", "true", "false",
        "null", "[", "]", ", ", D, " sort by ", "name", " desc", " skip 1", " limit none", "tags", "id"]


def _check_any_text(items_db, text):
    try:
        q = parse(text)
        c = compile_query(q, SYMBOLS)
    except (ParseError, FilterError, SortError):
        return
    items_db.execute(f"SELECT count(*) FROM items t WHERE {c.where} ORDER BY {c.order_by}", c.params).fetchall()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_random_text_raises_only_known_errors(items_db, text):
    _check_any_text(items_db, text)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(SOUP), max_size=12))
def test_token_soup_raises_only_known_errors(items_db, parts):
    _check_any_text(items_db, "".join(parts))


# -- no input text in SQL: every literal and tag key carries the marker "qzx"
MARK_STR = st.text(alphabet=string.ascii_letters + "'\";-- )(", max_size=8).map(lambda s: "QzX" + s)
MARK_NUM = st.sampled_from([987654321, -987654321, 987654.321])
MARK_DT = st.just(dt.datetime(1987, 6, 5, 4, 32, 10, tzinfo=UTC))
MARK_TAG = st.text(alphabet=string.ascii_letters + "_-", max_size=5).map(lambda s: "tags.qzx" + s)


def marked_leaves():
    opts = []
    for lhs in (Ref("name"), SetFunction("anyOf", "roleAttributes"), SetFunction("allOf", "roleAttributes")):
        opts += ops_for(lhs, st.one_of(MARK_STR, MARK_NUM), null_ok=False, text=False)
        opts.append(st.builds(Compare, st.just(lhs), st.sampled_from(TEXT_OPS), MARK_STR))
    opts += ops_for(Ref("num"), MARK_NUM, null_ok=False)
    opts += ops_for(Ref("createdAt"), MARK_DT, null_ok=False)
    opts.append(MARK_TAG.flatmap(lambda t: st.one_of(
        *ops_for(Ref(t), MARK_STR), *ops_for(Ref(t), MARK_NUM),
        st.builds(Compare, st.just(Ref(t)), st.sampled_from(["=", "!="]), st.booleans()),
        st.just(BareSymbol(t)))))
    return st.one_of(*opts)


MARKED = st.recursive(marked_leaves(), lambda inner: st.one_of(
    st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)), max_leaves=5)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MARKED)
def test_no_input_text_in_sql(items_db, pred):
    c = compile_query(Query(pred, (), None, None), SYMBOLS)
    sql = (c.where + " " + c.order_by).lower()
    for needle in ("qzx", "987654", "1987"):
        assert needle not in sql, (pred, c.where)
    assert c.where.count("?") == len(c.params)
    items_db.execute(f"SELECT count(*) FROM items t WHERE {c.where}", c.params).fetchall()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.ascii_letters + "_-.", min_size=1, max_size=12),
       st.text(alphabet=string.ascii_letters + "'\";-- )(", max_size=10))
def test_unknown_symbols_never_reach_sql(name, value):
    name = "qzx" + name
    for sym in (name, "tags." + name):
        try:
            c = compile_query(Query(Compare(Ref(sym), "=", "QZX" + value), (), None, None), SYMBOLS)
        except FilterError:
            continue
        assert "qzx" not in c.where.lower()


def test_largest_accepted_filter_runs_in_sqlite(items_db):
    ops = ["and", "or"]
    text = " ".join(("not " if i % 5 == 0 and i < 5 * z.MAX_NESTING else "") + f'name = "n{i}" {ops[i % 2]}'
                    for i in range(z.MAX_BOOL_OPS)) + ' anyOf(roleAttributes) != "x"'
    got, _ = run(items_db, text)
    assert sorted(got) == expected_ids(text)
