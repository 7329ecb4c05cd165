"""Router presence (``routing/presence.py``): what a router publishes, and what the API reads
through it of both kinds of router."""

from __future__ import annotations

from types import SimpleNamespace

from ziti_lite.routing import presence


class Embedded:
    router_id = "er-1"

    def has_connection(self, identity_id: str) -> bool:
        return identity_id == "id-e"

    def carries(self, session_id: str) -> bool:
        return session_id == "s-1"


def _ctl(edge=None, real=None):
    return SimpleNamespace(router_states={}, store=SimpleNamespace(online_routers=set()), edge_router=edge,
                           ctrl_server=real)


def test_online_and_offline_write_the_state_and_the_filter_set():
    ctl = _ctl()
    presence.online(ctl, "r1", {"isOnline": True, "hostname": "h"})
    assert presence.is_online(ctl, "r1") and presence.state(ctl, "r1")["hostname"] == "h"
    assert "r1" in ctl.store.online_routers
    presence.offline(ctl, "r1")
    assert not presence.is_online(ctl, "r1") and presence.state(ctl, "r1") == {}
    assert not ctl.store.online_routers
    presence.offline(ctl, "r1")   # twice: nothing to undo


def test_reads_cover_both_kinds_of_router():
    line = SimpleNamespace(name="real-1", listeners=[{"address": "tls:x:1", "protocol": "tls"}])
    circuits = SimpleNamespace(live={"c": 1}, carrying=lambda sid: ["real-1", "real-2"] if sid == "s-1" else [])
    real = SimpleNamespace(routers={"r-1": line}, links=SimpleNamespace(table={"l": 1}), circuits=circuits,
                           has_connection=lambda iid: iid == "id-r")
    ctl = _ctl(Embedded(), real)
    assert presence.has_connection(ctl, "id-e") and presence.has_connection(ctl, "id-r")
    assert not presence.has_connection(ctl, "id-x")
    assert presence.route_path(ctl, "s-1") == ["er-1", "real-1", "real-2"]
    assert presence.listeners(ctl, "r-1") == line.listeners and presence.listeners(ctl, "r-2") == []
    assert presence.line_name(ctl, "r-1") == "real-1" and presence.line_name(ctl, "r-2") is None
    assert presence.links(ctl) == {"l": 1} and presence.circuits(ctl) == {"c": 1}
    bare = _ctl()
    assert not presence.has_connection(bare, "id-e") and presence.route_path(bare, "s-1") == []
    assert presence.links(bare) == {} and presence.circuits(bare) == {}
