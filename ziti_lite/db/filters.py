"""Compile a parsed ZitiQL query (``ziti_lite.zitiql``) to parameterised SQLite SQL.

A resource describes what can be filtered with a symbol table: public symbol name → ``Symbol``
(kind + SQL over the main table, which is always aliased ``t``). The compiler emits SQL text
built only from that table and fixed keywords; every value that came from the filter text,
tag keys included, travels as a ``?`` parameter.

Storage conventions assumed: booleans INTEGER 0/1; datetimes TEXT ``YYYY-MM-DDTHH:MM:SS.mmmZ``
(UTC, millisecond precision, so text order is time order); sets and maps JSON text.

Semantics follow upstream ZitiQL: a comparison with a missing (NULL) value is false whatever
the operator (``!=`` and ``not contains`` included) and ``not`` is plain two-valued negation of
that; ``anyOf`` of an empty set is false, ``allOf`` of an empty set is true. ``contains`` is
case-sensitive; ``icontains`` upper-cases both sides with SQLite's ``upper()`` (ASCII only).
On a symbol with a substring index (``Symbol.search``), a positive ``contains``/``icontains``
with a needle of 3+ characters is answered by the FTS5 trigram index with the same result
(``search.py``), and a predicate that is only that comparison also gets a ``Compiled.count``.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

from .. import zitiql as zq
from . import search as _search

__all__ = [
    "FilterError", "SortError", "PagingError", "Symbol", "Symbols", "Compiled", "Page",
    "compile_query", "paging", "UNLIMITED_META", "DEFAULT_LIMIT", "MAX_LIMIT", "MAX_OFFSET",
    "MAX_SORT_FIELDS", "KINDS",
]

UNLIMITED_META = 9223372036854775807        # pagination.limit reported for `limit none` / -1
DEFAULT_LIMIT = 10
MAX_LIMIT = 500
MAX_OFFSET = 100000
MAX_SORT_FIELDS = 5

KINDS = ("string", "int", "float", "bool", "datetime", "set", "tags")
_SCALARS = ("string", "int", "float", "bool", "datetime")
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


class FilterError(ValueError):
    """The filter is well-formed but invalid for this resource (unknown symbol, type error...)."""


class SortError(ValueError):
    """A sort field is unknown or not sortable."""


class PagingError(ValueError):
    """A ``limit``/``offset`` query parameter is not an integer."""


@dataclass(frozen=True)
class Symbol:
    """What one public symbol means in SQL.

    kind: ``string`` ``int`` ``float`` ``bool`` ``datetime`` (scalars: ``sql`` is an expression
    over ``t``), ``set`` (``sql`` is a statement ``SELECT value FROM ...`` yielding the set's
    strings) or ``tags`` (``sql`` is the JSON object text; ``<name>.<key>`` symbols resolve into it).
    search: the entity table whose substring index (``search.py``) covers ``sql``, or "".
    """
    kind: str
    sql: str
    search: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown symbol kind {self.kind!r}")


Symbols = dict[str, Symbol]


@dataclass(frozen=True)
class Compiled:
    where: str                  # SQL condition over `t`; "1" when the query has no predicate
    params: list                # values for the `?`s of `where`, in order
    order_by: str               # e.g. "t.name ASC, t.id ASC"
    skip: int | None            # the filter's own skip/limit clauses (None when absent; -1 = none)
    limit: int | None
    # when the whole predicate is one indexed contains/icontains: (SQL, params) counting its rows
    # in the search index alone (no row reads)
    count: tuple[str, list] | None = None


class Page(NamedTuple):
    limit: int                  # -1: unlimited
    offset: int


# ====================================================================== helpers
_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")
_TAG_KEY = re.compile(r"[A-Za-z][A-Za-z_\-]*")
_COMPARISONS = (zq.EQ, zq.NE, zq.LT, zq.LE, zq.GT, zq.GE)
_TEXT_OPS = (zq.CONTAINS, zq.ICONTAINS, zq.NOT_CONTAINS, zq.NOT_ICONTAINS)
_ONE_MS = _dt.timedelta(milliseconds=1)


def _wrapped(sql: str) -> bool:
    """Whether `sql` is one parenthesised group, e.g. ``(SELECT ...)``."""
    if not (sql.startswith("(") and sql.endswith(")")):
        return False
    depth, quoted = 0, False
    for i, ch in enumerate(sql):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
            if depth == 0 and i < len(sql) - 1:
                return False
    return depth == 0


def _expr(sql: str) -> str:
    """A symbol's SQL as an operand: parenthesised unless it already is a single term."""
    return sql if _SIMPLE.fullmatch(sql) or _wrapped(sql) else f"({sql})"


def _lit_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise FilterError(f"invalid number {v}")
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, _dt.datetime):
        return "datetime"
    raise FilterError(f"unsupported literal {v!r}")


def _num_text(v: int | float) -> str:
    """A number as the decimal text a string symbol is compared with (no exponent)."""
    if isinstance(v, int):
        return str(v)
    text = format(Decimal(repr(v)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _dt_texts(v: _dt.datetime) -> tuple[str, str, bool]:
    """(floor, ceiling, exact) of a datetime in the stored millisecond text format."""
    try:
        u = (v if v.tzinfo else v.replace(tzinfo=_dt.UTC)).astimezone(_dt.UTC)
        floor = u.replace(microsecond=u.microsecond // 1000 * 1000)
        exact = floor == u
        ceil = floor if exact else floor + _ONE_MS
    except OverflowError:
        raise FilterError(f"datetime out of range: {v.isoformat()}") from None

    def fmt(t: _dt.datetime) -> str:
        return (f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
                f"{t.second:02d}.{t.microsecond // 1000:03d}Z")
    return fmt(floor), fmt(ceil), exact


def _type_error(op: str, left: str, right: str) -> FilterError:
    return FilterError(f"operation {op} is not supported with operand types {left}, {right}")


class _Val(NamedTuple):
    """A typed value expression: SQL text and the parameters its `?`s need, in order; search:
    the table whose substring index covers it ("" for none)."""
    kind: str
    sql: str
    params: list
    search: str = ""


# ====================================================================== compiler
class _Compiler:
    def __init__(self, symbols: Symbols):
        self.symbols = symbols
        self.search_count: tuple[str, list] | None = None    # the last indexed search's count query

    # -- symbols ------------------------------------------------------------------------
    def lookup(self, name: str) -> Symbol | tuple[str, str]:
        """A Symbol, or (tags column SQL, JSON path) for a ``<tags>.<key>`` name."""
        sym = self.symbols.get(name)
        if sym is not None:
            return sym
        head, dot, rest = name.partition(".")
        base = self.symbols.get(head) if dot else None
        if base is not None and base.kind == "tags":
            keys = rest.split(".")
            if all(_TAG_KEY.fullmatch(k) for k in keys):
                return _expr(base.sql), "$" + "".join(f'."{k}"' for k in keys)
        raise FilterError(f"unknown symbol '{name}'")

    def set_sql(self, target) -> str:
        if isinstance(target, zq.SubQuery):
            sym = self.symbols.get(target.symbol)
            if sym is None or sym.kind != "set":
                raise FilterError(f"unknown symbol '{target.symbol}'")
            raise FilterError(f"sub-queries are not supported (from {target.symbol} where ...)")
        found = self.lookup(target)
        if not isinstance(found, Symbol) or found.kind != "set":
            raise FilterError(f"symbol '{target}' is not a set symbol but is used in a set function")
        return found.sql

    # -- nodes --------------------------------------------------------------------------
    def node(self, n) -> tuple[str, list]:
        if isinstance(n, (zq.And, zq.Or)):
            # a right-nested chain of one operator becomes one flat SQL list: (a AND b AND c)
            cls, terms = type(n), []
            while isinstance(n, cls):
                terms.append(self.node(n.left))
                n = n.right
            terms.append(self.node(n))
            joiner = " AND " if cls is zq.And else " OR "
            return f"({joiner.join(t for t, _ in terms)})", [p for _, ps in terms for p in ps]
        if isinstance(n, zq.Not):
            s, p = self.node(n.expr)
            return f"(NOT coalesce({s}, 0))", p
        if isinstance(n, zq.BoolLiteral):
            return ("1" if n.value else "0"), []
        if isinstance(n, zq.BareSymbol):
            return self.bare(n.name)
        if isinstance(n, zq.IsEmpty):
            return f"(NOT EXISTS ({self.set_sql(n.target)}))", []
        if isinstance(n, (zq.Compare, zq.In, zq.Between)):
            return self.operation(n)
        raise FilterError(f"unsupported expression {type(n).__name__}")

    def bare(self, name: str) -> tuple[str, list]:
        sym = self.lookup(name)
        if isinstance(sym, tuple):
            col, path = sym
            return f"(json_type({col}, ?) = 'true')", [path]
        if sym.kind == "bool":
            return f"({_expr(sym.sql)} = 1)", []
        if sym.kind == "set":
            raise FilterError(f"symbol '{name}' is a set symbol but is used in non-set function context")
        raise FilterError(f"symbol '{name}' of type {sym.kind} can not be used as a boolean expression")

    def operation(self, n) -> tuple[str, list]:
        lhs = n.lhs
        if isinstance(lhs, zq.SetFunction):
            return self.set_operation(lhs, n)
        if not isinstance(lhs, zq.Ref):
            raise FilterError(f"unsupported operand {lhs!r}")
        sym = self.lookup(lhs.name)
        if isinstance(sym, tuple):
            return self.tag_operation(sym[0], sym[1], n)
        if sym.kind == "set":
            raise FilterError(f"symbol '{lhs.name}' is a set symbol but is used in non-set function context")
        if sym.kind == "tags":
            raise FilterError(f"symbol '{lhs.name}' is a map; filter on '{lhs.name}.<key>' instead")
        return self.typed(_Val(sym.kind, _expr(sym.sql), [], sym.search), n, allow_null=True)

    def set_operation(self, fn: zq.SetFunction, n) -> tuple[str, list]:
        if fn.func == zq.COUNT:
            val = _Val("int", f"(SELECT count(*) FROM ({self.set_sql(fn.target)}))", [])
            return self.typed(val, n, allow_null=False)
        if fn.func not in (zq.ANY_OF, zq.ALL_OF) or isinstance(fn.target, zq.SubQuery):
            raise FilterError(f"unsupported set function {fn.func}")
        source = self.set_sql(fn.target)
        cond, params = self.typed(_Val("string", "_zq_e.value", []), n, allow_null=False)
        if fn.func == zq.ANY_OF:
            return f"(EXISTS (SELECT 1 FROM ({source}) AS _zq_e WHERE {cond}))", params
        return f"(NOT EXISTS (SELECT 1 FROM ({source}) AS _zq_e WHERE NOT coalesce({cond}, 0)))", params

    def tag_operation(self, col: str, path: str, n) -> tuple[str, list]:
        """``tags.<key>``: the literal's type decides; a value of another JSON type never matches."""
        if isinstance(n, zq.Compare):
            lits = [n.value]
        elif isinstance(n, zq.In):
            lits = list(n.values)
        else:
            lits = [n.low, n.high]
        types = {_lit_type(v) for v in lits}
        if len(types) != 1:
            raise FilterError("mixed literal types")
        lt = types.pop()
        extract = f"json_extract({col}, ?)"
        if lt == "null":
            if isinstance(n, zq.Compare) and n.op in (zq.EQ, zq.NE):
                return f"({extract} IS {'NOT ' if n.op == zq.NE else ''}NULL)", [path]
            raise _type_error(getattr(n, "op", "in"), "any", "null")
        if lt == "bool":
            if isinstance(n, zq.Compare) and n.op in (zq.EQ, zq.NE):
                want = "true" if n.value == (n.op == zq.EQ) else "false"
                return f"(json_type({col}, ?) = '{want}')", [path]
            raise _type_error(getattr(n, "op", "in"), "any", "bool")
        text_op = isinstance(n, zq.Compare) and n.op in _TEXT_OPS
        kind = {"string": "string", "number": "float", "datetime": "datetime"}[lt]
        if text_op:
            kind = "string"
        guard = "= 'text'" if kind in ("string", "datetime") else "IN ('integer', 'real')"
        cond, params = self.typed(_Val(kind, extract, [path]), n, allow_null=False)
        return f"(json_type({col}, ?) {guard} AND {cond})", [path, *params]

    # -- one operation on a typed value -------------------------------------------------
    def typed(self, val: _Val, n, allow_null: bool) -> tuple[str, list]:
        if isinstance(n, zq.Compare):
            return self.compare(val, n.op, n.value, allow_null)
        if isinstance(n, zq.In):
            return self.in_(val, n.values, n.negated)
        return self.between(val, n.low, n.high, n.negated)

    @staticmethod
    def coerce(kind: str, op: str, v):
        lt = _lit_type(v)
        if kind == "string" and lt in ("string", "number"):
            return v if lt == "string" else _num_text(v)
        if kind in ("int", "float") and lt == "number":
            return v
        if kind == "bool" and lt == "bool":
            return int(v)
        if kind == "datetime" and lt == "datetime":
            return v
        raise _type_error(op, kind, lt)

    def compare(self, val: _Val, op: str, v, allow_null: bool) -> tuple[str, list]:
        x, xp = val.sql, val.params
        if op not in _COMPARISONS and op not in _TEXT_OPS:
            raise FilterError(f"unknown operator {op!r}")
        if v is None:
            if allow_null and op in (zq.EQ, zq.NE):
                return f"({x} IS {'NOT ' if op == zq.NE else ''}NULL)", xp
            raise _type_error(op, val.kind, "null")
        p = self.coerce(val.kind, op, v)
        if op in _TEXT_OPS:
            if val.kind != "string":
                raise _type_error(op, val.kind, _lit_type(v))
            if op in (zq.CONTAINS, zq.NOT_CONTAINS):
                test = f"instr({x}, ?)"
            else:
                test = f"instr(upper({x}), upper(?))"
            positive = op in (zq.CONTAINS, zq.ICONTAINS)
            if positive and val.search and _search.usable(p) and not xp:
                # the trigram index holds exactly the rows the plain test would pass
                folded, plain = op == zq.ICONTAINS, f"{test} > 0"
                self.search_count = (_search.count_sql(val.search, folded, plain), [p, p])
                return _search.condition(val.search, folded, plain), [p, p]
            return f"({test} {'> 0' if positive else '= 0'})", [*xp, p]
        if val.kind == "bool" and op not in (zq.EQ, zq.NE):
            raise _type_error(op, "bool", "bool")
        if val.kind == "datetime":
            floor, ceil, exact = _dt_texts(p)
            # stored values have millisecond precision: round a finer literal the right way
            if op == zq.EQ:
                return (f"({x} = ?)", [*xp, floor]) if exact else ("0", [])
            if op == zq.NE:
                return (f"({x} != ?)", [*xp, floor]) if exact else (f"({x} IS NOT NULL)", xp)
            p = ceil if op in (zq.LT, zq.GE) else floor
        return f"({x} {op} ?)", [*xp, p]

    def in_(self, val: _Val, values, negated: bool) -> tuple[str, list]:
        op = "not in" if negated else "in"
        if not values:
            raise FilterError(f"{op} needs a non-empty list")
        if val.kind == "bool":
            raise _type_error(op, "bool", _lit_type(values[0]))
        params = [self.coerce(val.kind, op, v) for v in values]
        if val.kind == "datetime":
            params = [floor for floor, _, exact in map(_dt_texts, params) if exact]
            if not params:
                return (f"({val.sql} IS NOT NULL)", val.params) if negated else ("0", [])
        marks = ", ".join("?" * len(params))
        return f"({val.sql} {'NOT IN' if negated else 'IN'} ({marks}))", [*val.params, *params]

    def between(self, val: _Val, low, high, negated: bool) -> tuple[str, list]:
        op = "not between" if negated else "between"
        if val.kind == "bool":
            raise _type_error(op, "bool", _lit_type(low))
        lo, hi = self.coerce(val.kind, op, low), self.coerce(val.kind, op, high)
        if val.kind == "datetime":
            lo, hi = _dt_texts(lo)[1], _dt_texts(hi)[0]
        return f"({val.sql} {'NOT BETWEEN' if negated else 'BETWEEN'} ? AND ?)", [*val.params, lo, hi]


def _order_by(sort, symbols: Symbols, default_sort: str) -> str:
    parts, seen = [], set()
    for f in sort[:MAX_SORT_FIELDS]:
        sym = symbols.get(f.field)
        if sym is None:
            head = f.field.partition(".")[0]
            if "." in f.field and head in symbols and symbols[head].kind == "tags":
                raise SortError(f"can not sort by '{f.field}'")
            raise SortError(f"unknown symbol '{f.field}'")
        if sym.kind not in _SCALARS:
            raise SortError(f"can not sort by '{f.field}': it is a {sym.kind} symbol")
        expr = _expr(sym.sql)
        seen.add(expr)
        parts.append(f"{expr} {'ASC' if f.ascending else 'DESC'}")
    if _expr(default_sort) not in seen:
        parts.append(f"{default_sort} ASC")
    return ", ".join(parts)


def compile_query(q: zq.Query, symbols: Symbols, default_sort: str = "t.id") -> Compiled:
    """Compile ``q`` for a table aliased ``t`` whose public symbols are ``symbols``.

    Raises FilterError for predicate problems and SortError for sort problems. Only the first
    MAX_SORT_FIELDS sort fields count; ``default_sort`` (the id) is always the last tiebreaker.
    """
    count = None
    params: list
    if q.predicate is None:
        where, params = "1", []
    else:
        compiler = _Compiler(symbols)
        where, params = compiler.node(q.predicate)
        if isinstance(q.predicate, zq.Compare) and compiler.search_count is not None:
            count = compiler.search_count
    return Compiled(where, params, _order_by(q.sort, symbols, default_sort), q.skip, q.limit, count)


# ====================================================================== paging
_PARAM_INT = re.compile(r"[+-]?[0-9]+")


def _param_int(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    if not _PARAM_INT.fullmatch(text):
        raise PagingError(f"{name} must be an integer, got {text!r}")
    v = int(text)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise PagingError(f"{name} out of range: {text}")
    return v


def paging(filter_skip: int | None, filter_limit: int | None,
           param_limit: str | None, param_offset: str | None) -> Page:
    """Effective (limit, offset) of a list request.

    The filter's ``limit``/``skip`` clauses win over the ``limit``/``offset`` query params (which
    are still validated: a non-integer param raises PagingError, as upstream reads them first).
    limit: absent, 0 or < -1 → 10; > 500 → 500; -1 (``limit none``) → -1 = unlimited (report
    UNLIMITED_META). offset: absent or negative → 0; > 100000 → 100000.
    """
    p_limit, p_offset = _param_int(param_limit, "limit"), _param_int(param_offset, "offset")
    limit = filter_limit if filter_limit is not None else p_limit
    offset = filter_skip if filter_skip is not None else p_offset
    if limit is None or limit == 0 or limit < -1:
        limit = DEFAULT_LIMIT
    elif limit > MAX_LIMIT:
        limit = MAX_LIMIT
    if offset is None or offset < 0:
        offset = 0
    elif offset > MAX_OFFSET:
        offset = MAX_OFFSET
    return Page(limit, offset)
