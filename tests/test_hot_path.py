"""The read hot path's shortcuts keep the behaviour of the plain code they replace.

Covered: the per-process session cache (dropped on any write, ours or another connection's),
the column-name cache of the store, the bare ``count(*)`` of unfiltered lists, the unrolled
row renderer, the batched related-row query of identity list pages, and the memoised
``expires-at`` header.
"""

from __future__ import annotations

import datetime as dt

import apsw
import msgspec

from ziti_lite import clock
from ziti_lite.api import render as rendering
from ziti_lite.resources.identities import IDENTITIES
from ziti_lite.wiring import resources as registry

from .conftest import ADMIN_USER


def test_session_cache_sees_own_writes(admin, ctl):
    assert admin.get("/current-api-session").status_code == 200
    with ctl.store.write():
        ctl.store.execute("DELETE FROM api_sessions WHERE token = ?", (admin.token,))
    assert admin.get("/current-api-session").status_code == 401


def test_session_cache_sees_other_connections(admin, ctl, db_path):
    assert admin.get("/identities").status_code == 200
    other = apsw.Connection(str(db_path))
    other.setbusytimeout(5000)
    admin_id = ctl.store.value("SELECT identity_id FROM api_sessions WHERE token = ?", (admin.token,))
    other.execute("UPDATE identities SET disabled_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (admin_id,))
    assert admin.get("/identities").status_code == 401
    other.execute("UPDATE identities SET disabled_at = NULL WHERE id = ?", (admin_id,))
    assert admin.get("/identities").status_code == 200
    other.execute("DELETE FROM api_sessions WHERE token = ?", (admin.token,))
    assert admin.get("/identities").status_code == 401
    other.close()


def test_session_cache_keeps_the_idle_timeout(admin, ctl):
    assert admin.get("/current-api-session").status_code == 200
    clock.advance(ctl.settings.session_timeout + 1)
    assert admin.get("/current-api-session").status_code == 401


def test_expiry_header_matches_go_time_text(admin, ctl):
    r = admin.get("/current-api-session")
    assert r.headers["expiration-seconds"] == str(ctl.settings.session_timeout)

    class S:
        last_activity_at = ""
    base = dt.datetime(2026, 3, 1, 23, 59, 58, tzinfo=dt.UTC)
    for ms in (0, 1, 10, 100, 120, 999, 1000, 1001, 2500, 86_399_999):
        S.last_activity_at = clock.fmt(base + dt.timedelta(milliseconds=ms))
        t = clock.parse(S.last_activity_at) + dt.timedelta(seconds=ctl.settings.session_timeout)
        frac = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
        assert dict(ctl._expiry_headers(S))[b"expires-at"].decode() == \
            t.strftime("%Y-%m-%d %H:%M:%S") + frac + " +0000 UTC"


def test_store_column_cache(ctl):
    store = ctl.store
    sql = "SELECT id, name FROM identity_types WHERE id = ?"
    assert store.one(sql, ("nope",)) is None
    assert store.one(sql, ("Default",)) == {"id": "Default", "name": "Default"}
    assert store.all(sql, ("nope",)) == []
    assert store.all(sql, ("Router",)) == [{"id": "Router", "name": "Router"}]


def test_unfiltered_and_filtered_counts(admin):
    for i in range(12):
        admin.create("identities", {"name": f"count-{i:02d}", "type": "User", "isAdmin": False})
    total = admin.get("/identities?limit=5").json()["meta"]["pagination"]["totalCount"]
    assert total == 13  # the default admin too
    page = admin.get('/identities?filter=name contains "count-1"').json()
    assert page["meta"]["pagination"]["totalCount"] == 2
    assert sorted(i["name"] for i in page["data"]) == ["count-10", "count-11"]


def test_unrolled_renderer_equals_the_declarations(ctl):
    for res in registry():
        row = {"id": "abc", "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-02T00:00:00.000Z",
               "tags": '{"a":1}'}
        for i, f in enumerate(res.fields):
            row[f.column] = (i % 2 if f.kind in ("bool", "int") else
                             ('{"k":[1,"x"]}' if f.kind in ("json", "map") else
                              ('["p","q"]' if f.kind == "set" else f"value-{i}")))
        for _, column, _ in res.row_links:
            row[column] = "ref-1"
        for id in ("abc", 'a"b\\c', "ümlaut"):   # ids that need escaping leave by the reference
            row["id"] = id
            for _, column, _ in res.row_links:
                row[column] = id
            fast = msgspec.json.encode(rendering._renderer(res)(row))
            assert fast == msgspec.json.encode(rendering._reference_render(res, row)), (res.name, id)
            assert msgspec.json.decode(fast)["_links"]["self"] == {"href": f"./{res.name}/{id}"}


def test_a_hook_adds_a_link_to_rendered_links():
    out = rendering._renderer(IDENTITIES)({"id": "x1", "created_at": "c", "updated_at": "u", "tags": "{}"})
    rendering.add_link(out, "extra", "./extra/x1")
    rendering.add_link(out, "self", "./elsewhere/x1")
    links = msgspec.json.decode(msgspec.json.encode(out))["_links"]
    assert links["self"] == {"href": "./elsewhere/x1"} and links["extra"] == {"href": "./extra/x1"}
    assert list(links)[0] == "self" and links["enrollments"] == {"href": "./identities/x1/enrollments"}


def test_identity_list_and_detail_render_the_same(admin, ctl):
    a = admin.create(
        "identities", {"name": "with-enrollment", "type": "User", "isAdmin": False, "enrollment": {"ott": True}}
    )
    b = admin.create("identities", {"name": "with-password", "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": b, "username": "pw-user", "password": "Secret-12"})
    listed = {i["id"]: i for i in admin.get("/identities?limit=100").json()["data"]}
    for id in (a, b, *listed):
        detail = admin.get(f"/identities/{id}").json()["data"]
        assert listed[id] == detail
    assert set(listed[a]["enrollment"]) == {"ott"} and listed[a]["authenticators"] == {}
    assert listed[b]["authenticators"]["updb"]["username"] == "pw-user"
    admin_row = next(i for i in listed.values() if i["isDefaultAdmin"])
    assert admin_row["authenticators"]["updb"]["username"] == ADMIN_USER
    assert admin_row["hasApiSession"] is True
