"""The data model's declarations and framing (``ctrl/rdm.py``): an entity's entry is exactly
its creation event as a ``DataState`` entry, so a full state joined from entries is the one
``pb`` encodes; a policy's link entry lists every id; the triggers fire on the declared columns
only."""

from __future__ import annotations

from tests.ctrl.fake_router import read_pb
from ziti_lite.ctrl import messages, pb, rdm


def test_an_entry_is_the_creation_event_framed_as_a_data_state_entry():
    for kind in rdm.KINDS:
        model = pb.encode(messages.RDM_CONFIG_TYPE, {"id": "x" * 200, "name": "n"})   # a 2-byte length
        state = pb.encode(messages.DATA_STATE, {"events": [rdm.event(kind.order, messages.RDM_ACTION_CREATE, model)]})
        assert rdm.entry(kind.order, model) == state
        assert rdm.model_of(rdm.entry(kind.order, model)) == model
    joined = rdm.entry(rdm.IDENTITY, b"a") + rdm.entry(rdm.SERVICE, b"bb") + rdm.state_tail(7, "tl")
    assert joined == pb.encode(messages.DATA_STATE, {
        "events": [rdm.event(rdm.IDENTITY, 0, b"a"), rdm.event(rdm.SERVICE, 0, b"bb")], "endIndex": 7,
        "timelineId": "tl"})


def test_a_link_entry_lists_every_id_as_the_link_event_does():
    ids = [f"id-{n:06d}" for n in range(5000)] + ["x" * 130]          # one id longer than a 1-byte length
    entry = read_pb(rdm.link_entry("p1", messages.RDM_RELATED_IDENTITY, ids))
    (event,) = entry[1]
    change = read_pb(read_pb(event)[rdm.LINK_FIELD][0])
    expected = read_pb(read_pb(rdm.link_event("p1", messages.RDM_RELATED_IDENTITY, ids, True))[rdm.LINK_FIELD][0])
    assert change == expected
    assert [v.decode() for v in change[2]] == ids
    parts = rdm.id_list(ids[:100]) + rdm.id_list(ids[100:])
    assert rdm.link_entry("p1", messages.RDM_RELATED_IDENTITY, ids, parts) == \
        rdm.link_entry("p1", messages.RDM_RELATED_IDENTITY, ids)


def test_the_triggers_fire_on_the_declared_columns_and_both_owners_of_a_moved_row():
    create, drop = rdm.triggers([(rdm.Mark("identities", columns=("name", "app_data")), ""),
                                 (rdm.Mark("identity_service_configs", "identity_id"), ""),
                                 (rdm.Mark("service_policy_identities", "policy_id", ("INSERT", "DELETE")),
                                  "identity_id")])
    assert "AFTER UPDATE OF name, app_data ON main.identities" in create
    assert "zl_rdm(1, OLD.identity_id, NULL)" in create and "WHEN OLD.identity_id IS NOT NEW.identity_id" in create
    assert "zl_rdm(2, NEW.policy_id, NEW.identity_id)" in create and "UPDATE ON main.service_policy_identities" \
        not in create
    assert create.count("CREATE TEMP TRIGGER") == drop.count("DROP TRIGGER")


def test_every_kind_of_a_table_is_read_by_id_and_in_chunks(ctl):
    for kind in rdm.SQL_KINDS:
        assert rdm.read(ctl.store, kind, ["no-such-id"]) == {}
        assert isinstance(rdm.read_chunk(ctl.store, kind, "", 10), list)
    snap = rdm.Snapshot(ctl.store)
    try:
        admins = rdm.read_chunk(snap, rdm.BY_ORDER[rdm.IDENTITY], "", 1000)
        assert {rid for rid, _, _ in admins} == set(ctl.store.column("SELECT id FROM identities"))
    finally:
        snap.close()
