from tests.conftest import assert_error


def test_login_and_create_identity(admin, anon):
    iid = admin.create("identities", {"name": "alice", "type": "User", "isAdmin": False})
    r = admin.get(f"/identities/{iid}")
    assert r.status_code == 200
    assert r.json()["data"]["name"] == "alice"
    assert_error(anon.get(f"/identities/{iid}"), 401, "UNAUTHORIZED")
