"""The login registries (``auth/methods.py``): primary methods and auth-query providers are
listed in the order their ``rank`` gives, whatever order their modules happen to load in."""

from __future__ import annotations

from ziti_lite import wiring
from ziti_lite.auth import methods


async def _nothing(ctx, body):
    raise AssertionError("never called")


def test_methods_are_in_rank_order_whatever_the_load_order(monkeypatch):
    monkeypatch.setattr(methods, "METHODS", {})
    monkeypatch.setattr(methods, "_METHOD_RANKS", {})
    for name, rank in (("ext-jwt", 3), ("password", 1), ("cert", 2)):
        methods.method(name, rank=rank)(_nothing)
    assert list(methods.METHODS) == ["password", "cert", "ext-jwt"]


def test_auth_queries_are_in_rank_order_whatever_the_load_order(monkeypatch):
    monkeypatch.setattr(methods, "AUTH_QUERY_PROVIDERS", [])
    monkeypatch.setattr(methods, "_QUERY_RANKS", {})

    def second(ctx, row, secondary):
        return []

    def first(ctx, row, secondary):
        return []

    methods.auth_query(rank=2)(second)
    methods.auth_query(rank=1)(first)
    assert methods.AUTH_QUERY_PROVIDERS == [first, second]


def test_the_wired_registries_are_upstreams_order():
    wiring.load()
    assert list(methods.METHODS) == ["password", "cert", "ext-jwt"]
    assert [fn.__name__ for fn in methods.AUTH_QUERY_PROVIDERS] == ["totp_auth_query", "ext_jwt_auth_query"]
