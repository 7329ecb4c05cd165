"""Terminator order and the one penalty table (``routing/strategy.py``), which both routers use."""

from __future__ import annotations

from ziti_lite.routing import strategy


def test_penalties_follow_the_table():
    assert strategy.penalised(0, "timeout") == 50 and strategy.penalised(0, "error") == 20
    assert strategy.penalised(30, "success") == 20 and strategy.penalised(5, "success") == 0   # never below 0
    assert strategy.penalised(20, "unhealthy") == 100 and strategy.penalised(150, "unhealthy") == 150
    assert strategy.penalised(150, "healthy") == 0


def test_order_puts_precedence_first_then_the_lowest_cost():
    items = [("a", "default", 10), ("b", "required", 50), ("c", "failed", 0), ("d", "default", 5)]
    ordered = strategy.order(items, "smartrouting", lambda t: t[1], lambda t: t[2])
    assert [t[0] for t in ordered] == ["b", "d", "a", "c"]
    assert {t[0] for t in strategy.order(items, "random", lambda t: t[1], lambda t: t[2])[1:3]} == {"a", "d"}
