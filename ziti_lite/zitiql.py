"""ZitiQL, the filter language of the OpenZiti edge APIs: lexer, parser and AST.

Pure: no database knowledge here (``ziti_lite.db.filters`` compiles the AST to SQL).

The language, in short (see the API conventions reference, section 2):

    query     := boolExpr [WS+ sortBy] [WS+ skip] [WS+ limit] | sortBy ... | skip ... | limit
    boolExpr  := primary [WS+ (and|or) WS+ boolExpr]        -- no precedence, right-greedy
    primary   := operation | "(" boolExpr ")" | not WS+ boolExpr | true | false
               | isEmpty(setExpr) | IDENT
    operation := lhs op value, lhs in [...], lhs between a and b, lhs [not] [i]contains v
    lhs       := IDENT | anyOf(IDENT) | allOf(IDENT) | count(setExpr)
    setExpr   := IDENT | from IDENT where query

Whitespace is significant exactly where the upstream grammar says so (one WS token per space,
tab, CR or LF); keywords are case-insensitive, ``datetime(`` is lowercase only, identifiers
contain no digits. The lexer picks the longest match at each position and, on a tie, the
keyword over the identifier, like the upstream ANTLR lexer. Unlike upstream, a character that
can start no token is a syntax error (reported at that character) rather than silently dropped.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass

__all__ = [
    "ParseError", "parse",
    "Query", "SortField", "SubQuery", "Ref", "SetFunction",
    "Compare", "In", "Between", "And", "Or", "Not", "BoolLiteral", "BareSymbol", "IsEmpty",
    "Node", "Lhs", "Value",
    "EQ", "NE", "LT", "LE", "GT", "GE", "CONTAINS", "ICONTAINS", "NOT_CONTAINS", "NOT_ICONTAINS",
    "ANY_OF", "ALL_OF", "COUNT",
]

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
# Limits that keep the AST, the compiler's recursion and SQLite's expression depth (1000) safe.
MAX_NESTING = 50                # nested parentheses, `not`s and sub-queries
MAX_BOOL_OPS = 200              # and/or operators in one filter


# ====================================================================== errors
class ParseError(ValueError):
    """A syntax error, positioned at the first offending token (line 1-based, column 0-based)."""

    def __init__(self, token: str, line: int, column: int, message: str | None = None):
        self.token = token
        self.line = line
        self.column = column
        self.message = message or f'Unexpected symbol: "{token}" at line: {line} column: {column}'
        super().__init__(f"{self.message}. line: {line}, column: {column}, symbol: {token}")


# ====================================================================== AST
Value = str | int | float | bool | None | _dt.datetime

EQ, NE, LT, LE, GT, GE = "=", "!=", "<", "<=", ">", ">="
CONTAINS, ICONTAINS = "contains", "icontains"
NOT_CONTAINS, NOT_ICONTAINS = "not contains", "not icontains"
ANY_OF, ALL_OF, COUNT = "anyOf", "allOf", "count"


@dataclass(frozen=True)
class SortField:
    field: str
    ascending: bool = True


@dataclass(frozen=True)
class Query:
    predicate: Node | None                # None: no predicate, i.e. true
    sort: tuple[SortField, ...] = ()
    skip: int | None = None
    limit: int | None = None                # -1 for ``limit none``


@dataclass(frozen=True)
class SubQuery:
    """``from <symbol> where <query>`` inside count(...) / isEmpty(...)."""
    symbol: str
    query: Query


@dataclass(frozen=True)
class Ref:
    """A symbol used as the left-hand side of an operation."""
    name: str


@dataclass(frozen=True)
class SetFunction:
    """``anyOf(S)`` / ``allOf(S)`` / ``count(S)`` as the left-hand side of an operation."""
    func: str                               # ANY_OF | ALL_OF | COUNT
    target: str | SubQuery                # a symbol name (always for anyOf/allOf) or a sub-query


Lhs = Ref | SetFunction


@dataclass(frozen=True)
class Compare:
    lhs: Lhs
    op: str                                 # EQ NE LT LE GT GE CONTAINS ICONTAINS NOT_CONTAINS NOT_ICONTAINS
    value: Value


@dataclass(frozen=True)
class In:
    lhs: Lhs
    values: tuple                           # non-empty; all strings, all numbers or all datetimes
    negated: bool = False


@dataclass(frozen=True)
class Between:
    lhs: Lhs
    low: Value                              # both numbers or both datetimes
    high: Value
    negated: bool = False


@dataclass(frozen=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True)
class Not:
    expr: Node


@dataclass(frozen=True)
class BoolLiteral:
    value: bool


@dataclass(frozen=True)
class BareSymbol:
    """A symbol used as a boolean on its own, e.g. ``isAdmin``."""
    name: str


@dataclass(frozen=True)
class IsEmpty:
    target: str | SubQuery


Node = Compare | In | Between | And | Or | Not | BoolLiteral | BareSymbol | IsEmpty


# ====================================================================== lexer
@dataclass(frozen=True)
class Token:
    type: str
    text: str
    line: int
    column: int


_W = r"[ \t\r\n]"
_I = re.IGNORECASE | re.ASCII
_INT = r"(?:0|[1-9][0-9]*)"
_SEG = r"[A-Za-z][A-Za-z_]*(?:\.[A-Za-z][A-Za-z_\-]*)*"
_RFC3339 = (r"([0-9]+)-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]"
            r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(?:\.([0-9]+))?"
            r"([Zz]|[+\-](?:[01][0-9]|2[0-3]):[0-5][0-9])")

# In priority order: on equal length the earlier rule wins (keywords before identifiers).
_RULES: list[tuple[str, re.Pattern]] = [(name, re.compile(rx, flags)) for name, rx, flags in [
    ("WS", _W, 0),
    ("LPAREN", r"\(", 0),
    ("RPAREN", r"\)", 0),
    ("LBRACKET", r"\[", 0),
    ("RBRACKET", r"\]", 0),
    ("COMMA", r",", 0),
    ("AND", r"and", _I),
    ("OR", r"or", _I),
    ("LT", r"<=?", 0),
    ("GT", r">=?", 0),
    ("EQ", r"!?=", 0),
    ("CONTAINS", rf"(?:not{_W}+)?contains", _I),
    ("ICONTAINS", rf"(?:not{_W}+)?icontains", _I),
    ("IN", rf"(?:not{_W})?in", _I),
    ("BETWEEN", rf"(?:not{_W}+)?between", _I),
    ("BOOL", r"true|false", _I),
    ("DATETIME", rf"datetime\({_W}*{_RFC3339}{_W}*\)", re.ASCII),
    ("ALL_OF", r"allof", _I),
    ("ANY_OF", r"anyof", _I),
    ("COUNT", r"count", _I),
    ("ISEMPTY", r"isempty", _I),
    ("STRING", r'"(?:\\["\\fnrt]|[^"\\\x00-\x1f])*"', 0),
    ("NUMBER", rf"-?{_INT}(?:\.[0-9]+)?(?:[eE][+\-]?{_INT})?", 0),
    ("NULL", r"null", _I),
    ("NOT", r"not", _I),
    ("ASC", r"asc", _I),
    ("DESC", r"desc", _I),
    ("SORT", r"sort", _I),
    ("BY", r"by", _I),
    ("SKIP", r"skip", _I),
    ("LIMIT", r"limit", _I),
    ("NONE", r"none", _I),
    ("WHERE", r"where", _I),
    ("FROM", r"from", _I),
    ("IDENT", rf"{_SEG}|'{_SEG}'", 0),
]]
_DATETIME_INNER = re.compile(_RFC3339, re.ASCII)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens (one WS token per whitespace character), ending with EOF."""
    tokens: list[Token] = []
    pos, line, line_start, n = 0, 1, 0, len(text)
    while pos < n:
        best_type, best_end = None, pos
        for name, rx in _RULES:
            m = rx.match(text, pos)
            if m and m.end() > best_end:
                best_type, best_end = name, m.end()
        if best_type is None:  # no token starts here: the parser reports it when it gets here
            best_type, best_end = "INVALID", pos + 1
        chunk = text[pos:best_end]
        tokens.append(Token(best_type, chunk, line, pos - line_start))
        for i, ch in enumerate(chunk):  # WS and `not <ws> in` tokens may span lines
            if ch == "\n":
                line += 1
                line_start = pos + i + 1
        pos = best_end
    tokens.append(Token("EOF", "<EOF>", line, pos - line_start))
    return tokens


# ====================================================================== literals
_UNESCAPE = {'"': '"', "\\": "\\", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _string_value(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: _UNESCAPE[m.group(1)], body)


def _number_value(tok: Token) -> int | float:
    text = tok.text
    if re.fullmatch(r"-?[0-9]+", text):
        v = int(text)
        if INT64_MIN <= v <= INT64_MAX:
            return v
    f = float(text)
    if not math.isfinite(f):
        raise ParseError(tok.text, tok.line, tok.column, f"number out of range: {tok.text}")
    return f


def _datetime_value(tok: Token) -> _dt.datetime:
    m = _DATETIME_INNER.search(tok.text)
    assert m is not None
    year, month, day, hour, minute, second, frac, offset = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    if offset in ("Z", "z"):
        tz = _dt.UTC
    else:
        sign = -1 if offset[0] == "-" else 1
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    try:
        return _dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                            micro, tzinfo=tz)
    except (ValueError, OverflowError):
        raise ParseError(tok.text, tok.line, tok.column, f"invalid datetime: {tok.text}") from None


def _literal(tok: Token) -> Value:
    t = tok.type
    if t == "STRING":
        return _string_value(tok.text)
    if t == "NUMBER":
        return _number_value(tok)
    if t == "DATETIME":
        return _datetime_value(tok)
    if t == "BOOL":
        return tok.text.lower() == "true"
    if t == "NULL":
        return None
    raise AssertionError(t)


# ====================================================================== parser
_COMPARE_VALUES = {
    "LT": ("STRING", "NUMBER", "DATETIME"),
    "GT": ("STRING", "NUMBER", "DATETIME"),
    "EQ": ("STRING", "NUMBER", "DATETIME", "BOOL", "NULL"),
}
_SET_FUNCS = {"ANY_OF": ANY_OF, "ALL_OF": ALL_OF, "COUNT": COUNT}


class _Parser:
    def __init__(self, text: str):
        self.toks = tokenize(text)
        self.i = 0
        self.depth = 0          # open parentheses / not / sub-queries
        self.bool_ops = 0       # and/or operators so far

    # -- token helpers ------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def ws_run(self) -> int:
        """How many WS tokens start at the current position."""
        k = 0
        while self.peek(k).type == "WS":
            k += 1
        return k

    def fail(self, tok: Token | None = None) -> ParseError:
        tok = tok or self.peek()
        return ParseError(tok.text, tok.line, tok.column)

    def next(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, *types: str) -> Token:
        tok = self.peek()
        if tok.type not in types:
            raise self.fail(tok)
        self.i += 1
        return tok

    def skip_ws(self) -> None:
        self.i += self.ws_run()

    def require_ws(self) -> None:
        k = self.ws_run()
        if k == 0:
            raise self.fail()
        self.i += k

    # -- grammar ------------------------------------------------------------------------
    def start(self) -> Query:
        self.skip_ws()
        q = self.query()
        self.skip_ws()
        self.expect("EOF")
        return q

    def query(self) -> Query:
        predicate: Node | None = None
        sort: tuple[SortField, ...] = ()
        skip: int | None = None
        limit: int | None = None
        first = self.peek().type
        if first == "SORT":
            sort, stage = self.sort_by(), 1
        elif first == "SKIP":
            skip, stage = self.skip(), 2
        elif first == "LIMIT":
            limit, stage = self.limit(), 3
        else:
            predicate, stage = self.bool_expr(), 0
        while True:
            k = self.ws_run()
            nxt = self.peek(k).type
            if k == 0:
                break
            if nxt == "SORT" and stage < 1:
                self.i += k
                sort, stage = self.sort_by(), 1
            elif nxt == "SKIP" and stage < 2:
                self.i += k
                skip, stage = self.skip(), 2
            elif nxt == "LIMIT" and stage < 3:
                self.i += k
                limit, stage = self.limit(), 3
            else:
                break
        return Query(predicate, sort, skip, limit)

    def _int_clause(self) -> int:
        tok = self.expect("NUMBER")
        v = _number_value(tok)
        if not isinstance(v, int):
            raise ParseError(tok.text, tok.line, tok.column,
                             f'expected an integer, got "{tok.text}" at line: {tok.line} column: {tok.column}')
        return v

    def skip(self) -> int:
        self.expect("SKIP")
        self.require_ws()
        return self._int_clause()

    def limit(self) -> int:
        self.expect("LIMIT")
        self.require_ws()
        if self.peek().type == "NONE":
            self.next()
            return -1
        return self._int_clause()

    def sort_by(self) -> tuple[SortField, ...]:
        self.expect("SORT")
        self.require_ws()
        self.expect("BY")
        self.require_ws()
        fields = [self.sort_field()]
        while True:
            k = self.ws_run()
            if self.peek(k).type != "COMMA":
                break
            self.i += k + 1
            self.skip_ws()
            fields.append(self.sort_field())
        return tuple(fields)

    def sort_field(self) -> SortField:
        name = self.expect("IDENT").text
        k = self.ws_run()
        if k and self.peek(k).type in ("ASC", "DESC"):
            self.i += k
            return SortField(name, self.next().type == "ASC")
        return SortField(name, True)

    def bool_expr(self) -> Node:
        """``primary (WS+ (and|or) WS+ primary)*`` folded from the right: each operator takes
        everything after it as its right operand (no precedence between and/or)."""
        items, ops = [self.primary()], []
        while True:
            k = self.ws_run()
            op = self.peek(k)
            if not (k and op.type in ("AND", "OR")):
                break
            self.bool_ops += 1
            if self.bool_ops > MAX_BOOL_OPS:
                raise ParseError(op.text, op.line, op.column,
                                 f"too many and/or operators (max {MAX_BOOL_OPS}) at line: {op.line} "
                                 f"column: {op.column}")
            self.i += k + 1
            self.require_ws()
            ops.append(op.type)
            items.append(self.primary())
        result = items.pop()
        while ops:
            left = items.pop()
            result = And(left, result) if ops.pop() == "AND" else Or(left, result)
        return result

    def nest(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ParseError(tok.text, tok.line, tok.column,
                             f"filter nested too deeply (max {MAX_NESTING}) at line: {tok.line} "
                             f"column: {tok.column}")

    def primary(self) -> Node:
        tok = self.peek()
        t = tok.type
        if t == "LPAREN":
            self.nest(tok)
            self.next()
            self.skip_ws()
            inner = self.bool_expr()
            self.skip_ws()
            self.expect("RPAREN")
            self.depth -= 1
            return inner
        if t == "NOT":
            self.nest(tok)
            self.next()
            self.require_ws()
            inner = self.bool_expr()
            self.depth -= 1
            return Not(inner)
        if t == "BOOL":
            self.next()
            return BoolLiteral(tok.text.lower() == "true")
        if t == "ISEMPTY":
            self.next()
            self.expect("LPAREN")
            self.skip_ws()
            target = self.set_expr()
            self.skip_ws()
            self.expect("RPAREN")
            return IsEmpty(target)
        if t == "IDENT":
            self.next()
            k = self.ws_run()
            if self.peek(k).type in ("LT", "GT", "EQ", "CONTAINS", "ICONTAINS", "IN", "BETWEEN"):
                return self.operation(Ref(tok.text))
            return BareSymbol(tok.text)
        if t in _SET_FUNCS:
            return self.operation(self.set_function())
        raise self.fail(tok)

    def set_function(self) -> SetFunction:
        func = _SET_FUNCS[self.next().type]
        self.expect("LPAREN")
        self.skip_ws()
        target = self.set_expr() if func == COUNT else self.expect("IDENT").text
        self.skip_ws()
        self.expect("RPAREN")
        return SetFunction(func, target)

    def set_expr(self) -> str | SubQuery:
        if self.peek().type == "FROM":
            self.nest(self.next())
            self.require_ws()
            symbol = self.expect("IDENT").text
            self.require_ws()
            self.expect("WHERE")
            self.require_ws()
            sub = SubQuery(symbol, self.query())
            self.depth -= 1
            return sub
        return self.expect("IDENT").text

    def value(self, *types: str) -> tuple[str, Value]:
        tok = self.expect(*types)
        return tok.type, _literal(tok)

    def operation(self, lhs: Lhs) -> Node:
        k = self.ws_run()
        op_tok = self.peek(k)
        t = op_tok.type
        negated = op_tok.text[:3].lower() == "not"
        if t in ("IN", "BETWEEN"):
            if k == 0:
                raise self.fail(op_tok)
            self.i += k + 1
            self.require_ws()
            if t == "IN":
                self.expect("LBRACKET")
                self.skip_ws()
                kind, first = self.value("STRING", "NUMBER", "DATETIME")
                values = [first]
                while True:
                    k = self.ws_run()
                    if self.peek(k).type == "COMMA":
                        self.i += k + 1
                        self.skip_ws()
                        values.append(self.value(kind)[1])
                    else:
                        self.skip_ws()
                        self.expect("RBRACKET")
                        break
                return In(lhs, tuple(values), negated)
            kind, low = self.value("NUMBER", "DATETIME")
            self.require_ws()
            self.expect("AND")
            self.require_ws()
            high = self.value(kind)[1]
            return Between(lhs, low, high, negated)
        if t in ("LT", "GT", "EQ"):
            self.i += k + 1
            self.skip_ws()
            return Compare(lhs, op_tok.text, self.value(*_COMPARE_VALUES[t])[1])
        if t in ("CONTAINS", "ICONTAINS"):
            self.i += k + 1
            self.require_ws()
            if t == "CONTAINS":
                value = self.value("STRING", "NUMBER")[1]
                return Compare(lhs, NOT_CONTAINS if negated else CONTAINS, value)
            value = self.value("STRING")[1]
            return Compare(lhs, NOT_ICONTAINS if negated else ICONTAINS, value)
        raise self.fail(op_tok)


def parse(text: str) -> Query:
    """Parse a ZitiQL filter. The empty string is the empty query (no predicate: all rows).

    Raises ParseError on any syntax error (including invalid datetimes and non-integer
    ``skip``/``limit`` values). Symbols are not checked here: that is the compiler's job.
    """
    if text == "":
        return Query(None, (), None, None)
    query = _PARSED.get(text)
    if query is None:
        query = _Parser(text).start()
        if len(_PARSED) >= PARSED_MAX:
            _PARSED.clear()
        _PARSED[text] = query
    return query


# filter text -> its (immutable) Query: a client asks with the same few filters again and again
# (the CLI's name lookups, a console's searches), and parsing one costs ~150 µs
PARSED_MAX = 1024
_PARSED: dict[str, Query] = {}
