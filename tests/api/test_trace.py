from tests.conftest import assert_error


def test_trace_enable_disable(admin):
    iid = admin.create("identities", {"name": "traced", "type": "User", "isAdmin": False})
    r = admin.put(f"/identities/{iid}/trace", json={"enabled": True, "duration": "1h30m", "traceId": "t1"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["enabled"] is True and data["traceId"] == "t1" and data["until"].endswith("Z")
    r = admin.put(f"/identities/{iid}/trace", json={"enabled": False})
    assert r.json()["data"]["enabled"] is False
    assert_error(
        admin.put(f"/identities/{iid}/trace", json={"enabled": True, "duration": "soon"}), 400, "COULD_NOT_VALIDATE"
    )
    assert_error(admin.put("/identities/nope/trace", json={"enabled": True}), 404, "NOT_FOUND")
