"""Query parameters as a handler reads them (``Ctx.q``/``Ctx.qlist``): the same values as
Starlette's ``query_params``, from the request's query string."""

from __future__ import annotations

import pytest
from starlette.datastructures import QueryParams
from starlette.requests import Request

from ziti_lite.api.context import Ctx


@pytest.mark.parametrize("query", [
    "", "limit=10", "limit=10&offset=20", "filter=name%20contains%20%22a%22", "filter=a+b&filter=c",
    "roleFilter=%23one&roleFilter=%23two&roleSemantic=anyOf", "flag&x=&=v&&y=1", "q=%E2%82%AC&r=é", "a=b=c",
])
def test_query_parameters_read_as_starlette_reads_them(query):
    raw = query.encode("utf-8")
    ctx = Ctx(None, Request({"type": "http", "query_string": raw, "headers": []}), "management", {}, None)  # type: ignore[arg-type]
    expected = QueryParams(raw.decode("latin-1"))
    for name in {*expected.keys(), "absent"}:
        assert ctx.qlist(name) == expected.getlist(name), (query, name)
        assert ctx.q(name, "d") == (expected.getlist(name) or ["d"])[0]
