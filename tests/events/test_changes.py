"""entityChange events from the management API's writes: created/updated/deleted with the
entity's detail before and after (secrets redacted), the author, then committed."""

from __future__ import annotations

# fields of upstream v1.3.3's EntityChangeEvent (controller/event/entity_change.go), by JSON name
ENTITY_CHANGE_FIELDS = {"namespace", "eventId", "eventType", "event_src_id", "timestamp", "metadata", "entityType",
                        "isParentEvent", "initialState", "finalState"}


def test_create_update_delete_of_a_service(served):
    client, admin, events = served
    sid = admin.create("services", {"name": "billing", "encryptionRequired": True, "roleAttributes": ["a"]})
    assert admin.patch(f"/services/{sid}", json={"roleAttributes": ["b"]}).status_code == 200
    assert admin.delete(f"/services/{sid}").status_code == 200
    client.__exit__(None, None, None)
    changes = [e for e in events.of("entityChange", entityType="services")]
    kinds = [e["eventType"] for e in changes]
    assert kinds == ["created", "committed", "updated", "committed", "deleted", "committed"]
    created, _, updated, _, deleted, _ = changes
    for e in (created, updated, deleted):
        assert set(e) <= ENTITY_CHANGE_FIELDS
        assert {"namespace", "eventId", "eventType", "event_src_id", "timestamp", "entityType"} <= set(e)
        assert e["metadata"]["authorType"] == "identity"
        assert e["metadata"]["authorName"] == "Default Admin"
        assert e["metadata"]["src.type"] == "rest"
        assert e["metadata"]["apiSessionId"]
    assert created["finalState"]["name"] == "billing" and "initialState" not in created
    assert updated["initialState"]["roleAttributes"] == ["a"] and updated["finalState"]["roleAttributes"] == ["b"]
    assert deleted["initialState"]["id"] == sid and "finalState" not in deleted
    assert changes[1]["eventId"] == created["eventId"]   # committed names the change it closes
    assert created["timestamp"].endswith("Z") and "T" in created["timestamp"]


def test_a_write_that_fails_emits_nothing(served):
    client, admin, events = served
    admin.create("services", {"name": "dup", "encryptionRequired": True})
    assert admin.post("/services", json={"name": "dup", "encryptionRequired": True}).status_code == 400
    client.__exit__(None, None, None)
    assert len(events.of("entityChange", entityType="services", eventType="created")) == 1


def test_enrollment_tokens_are_redacted_in_states(served):
    client, admin, events = served
    iid = admin.create("identities", {"name": "eve", "type": "Device", "isAdmin": False,
                                      "enrollment": {"ott": True}})
    detail = admin.get(f"/identities/{iid}").json()["data"]
    jwt = detail["enrollment"]["ott"]["jwt"]
    token = detail["enrollment"]["ott"]["token"]
    client.__exit__(None, None, None)
    text = events.path.read_text()
    assert events.of("entityChange", entityType="identities", eventType="created")
    assert jwt not in text and token not in text


def test_disable_and_enable_of_an_identity_are_updates(served):
    client, admin, events = served
    iid = admin.create("identities", {"name": "dora", "type": "Device", "isAdmin": False})
    assert admin.post(f"/identities/{iid}/disable", json={"durationMinutes": 5}).status_code == 200
    assert admin.post(f"/identities/{iid}/enable").status_code == 200
    client.__exit__(None, None, None)
    updates = events.of("entityChange", entityType="identities", eventType="updated")
    assert len(updates) == 2
    disabled, enabled = updates
    assert disabled["initialState"]["disabledAt"] is None and disabled["finalState"]["disabledAt"]
    assert disabled["finalState"]["disabledUntil"] > disabled["finalState"]["disabledAt"]
    assert enabled["initialState"]["disabledAt"] and enabled["finalState"]["disabledAt"] is None
    assert enabled["finalState"]["disabledUntil"] is None
    assert all(u["metadata"]["authorName"] == "Default Admin" for u in updates)
