"""Ids: short random entity ids, and the time-ordered ids of API sessions."""

from __future__ import annotations

import re

from ziti_lite import ids


def test_entity_ids_are_ten_base62_characters():
    assert all(re.fullmatch(r"[0-9a-zA-Z]{10}", ids.new_id()) for _ in range(1000))


def test_sortable_ids_have_upstreams_cuid_shape_and_sort_in_creation_order():
    made = [ids.new_sortable_id() for _ in range(20000)]      # many within one millisecond
    assert all(re.fullmatch(r"c[0-9a-z]{24}", i) for i in made)
    assert made == sorted(made) and len(set(made)) == len(made)


def test_sortable_ids_keep_their_order_when_the_clock_steps_back(monkeypatch):
    first = ids.new_sortable_id()
    now = ids.time.time_ns()
    monkeypatch.setattr(ids.time, "time_ns", lambda: now - 3_600 * 10**9)   # an hour back
    later = [ids.new_sortable_id() for _ in range(100)]
    assert [first, *later] == sorted([first, *later])
