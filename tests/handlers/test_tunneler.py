"""Tunneler-enabled edge routers: their Router identity and system edge router policy."""

from __future__ import annotations

from tests.conftest import assert_error


def _system_policies(admin):
    return admin.get("/edge-router-policies", params={"filter": "isSystem = true"}).json()["data"]


def test_create_enabled_makes_identity_and_policy(admin, net):
    r = net.router("pub", name="tun-1", tunneler=True)
    ident = admin.get(f"/identities/{r}").json()["data"]
    assert ident["name"] == "tun-1" and ident["typeId"] == "Router" and ident["isAdmin"] is False
    assert ident["roleAttributes"] is None and ident["enrollment"] == {}  # null: upstream's storage keeps no empty list
    p = admin.get(f"/edge-router-policies/{r}").json()["data"]
    assert p["name"] == f"edge-router-{r}-system" and p["semantic"] == "AnyOf" and p["isSystem"] is True
    assert p["identityRoles"] == [f"@{r}"] and p["edgeRouterRoles"] == [f"@{r}"]
    assert p["identityRolesDisplay"] == [{"role": f"@{r}", "name": "@tun-1"}]
    assert net.ids(f"/identities/{r}/edge-routers") == {r}
    assert net.ids(f"/edge-routers/{r}/identities") == {r}


def test_toggle_rename_and_delete(admin, net):
    r = net.router(name="tun-2")
    assert admin.get(f"/identities/{r}").status_code == 404 and _system_policies(admin) == []
    assert admin.patch(f"/edge-routers/{r}", json={"isTunnelerEnabled": True}).status_code == 200
    assert admin.get(f"/identities/{r}").json()["data"]["name"] == "tun-2"
    assert [p["id"] for p in _system_policies(admin)] == [r]

    assert admin.patch(f"/edge-routers/{r}", json={"name": "tun-2b"}).status_code == 200
    assert admin.get(f"/identities/{r}").json()["data"]["name"] == "tun-2b"
    assert admin.get(f"/edge-router-policies/{r}").json()["data"]["edgeRouterRolesDisplay"][0]["name"] == "@tun-2b"

    # the Router identity goes with its router only
    assert_error(admin.delete(f"/identities/{r}"), 400, "ENTITY_CAN_NOT_BE_DELETED")

    # a PUT without isTunnelerEnabled turns it off
    assert admin.put(f"/edge-routers/{r}", json={"name": "tun-2b"}).status_code == 200
    assert admin.get(f"/identities/{r}").status_code == 404 and _system_policies(admin) == []

    admin.patch(f"/edge-routers/{r}", json={"isTunnelerEnabled": True})
    sp = net.sp("Bind", identities=[f"@{r}"], services=["#x"])
    assert admin.delete(f"/edge-routers/{r}").status_code == 200
    assert admin.get(f"/identities/{r}").status_code == 404 and _system_policies(admin) == []
    assert admin.get(f"/service-policies/{sp}").json()["data"]["identityRoles"] is None  # null as upstream


def test_identity_name_clash(admin, net):
    net.identity(name="taken")
    r = admin.post("/edge-routers", json={"name": "taken", "isTunnelerEnabled": True})
    assert_error(r, 400, "COULD_NOT_VALIDATE")
    assert admin.get("/edge-routers", params={"filter": 'name = "taken"'}).json()["data"] == []


def test_delete_through_routers_collection(admin, net):
    r = net.router(name="tun-3", tunneler=True)
    assert admin.delete(f"/routers/{r}").status_code == 200
    assert admin.get(f"/identities/{r}").status_code == 404 and _system_policies(admin) == []
