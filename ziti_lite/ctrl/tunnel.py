"""Tunneler-enabled real routers (``isTunnelerEnabled``): the router hosts services itself.

A router whose configuration has a ``tunnel`` listener (``ziti create config router edge
--tunnelerMode host``) works as an SDK of its own over the control channel, under its identity of
type Router (same id as the router, made by ``handlers/tunneler.py`` when the API turns tunneling
on; the policies reach it by ``@name`` or by the role attributes given to that identity):

* ``CreateApiSession``: an API session for the router's identity (kept while it exists);
* ``ListServices``: the services the identity may reach, with permissions and the configs of the
  requested types (``host.v1`` and ``host.v2`` among them), sent when they changed since the
  ``lastUpdate`` the router holds;
* ``CreateTunnelTerminator``: for a service it binds (a host config), a Bind session of its own
  and a terminator with binding ``tunnel`` on the router, dialled by ``Route`` like any other;
* removal, cost/precedence updates and health events of those terminators.

Its API session and sessions outlive a reconnect of the router, as upstream's do.

Any other router asking is answered upstream's ``tunneling not enabled`` (code 7), and exits:
a router that is not tunneler-enabled must be configured with ``--tunnelerMode none``. Dialing
from the router's own intercepts (``CreateCircuitForService``) is not served.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import clock
from ..auth import service_tokens
from ..channel.wire import Message
from ..ids import new_id, new_sortable_id
from ..policy.access import VISIBLE
from ..routing import checks
from . import messages, pb
from .messages import C, H
from .part import Handler, Part
from .terminators import Refused

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

TUNNELING_NOT_ENABLED = 7
INVALID_SERVICE = 6
REFRESH_SECONDS = 60
GO_EPOCH = dt.datetime(1, 1, 1, tzinfo=dt.UTC)

_PERMISSIONS = ("SELECT s.service_id, i.type FROM service_policy_identities i"
                " JOIN service_policy_services s ON s.policy_id = i.policy_id"
                " WHERE i.identity_id = ? AND s.service_id IN (SELECT value FROM json_each(?))")
_CONFIGS = ("SELECT sc.service_id, ct.id AS type_id, ct.name AS type_name, c.data FROM service_configs sc"
            " JOIN configs c ON c.id = sc.config_id JOIN config_types ct ON ct.id = c.config_type_id"
            " WHERE sc.service_id IN (SELECT value FROM json_each(?))")
_OVERRIDES = ("SELECT o.service_id, ct.id AS type_id, ct.name AS type_name, c.data FROM identity_service_configs o"
              " JOIN configs c ON c.id = o.config_id JOIN config_types ct ON ct.id = o.config_type_id"
              " WHERE o.identity_id = ?")


@dataclass
class TunnelState:
    """What one tunneler router was given: its API session, config types, service list stamp."""
    api_session: tuple[str, str] | None = None      # (id, token)
    config_types: list[str] = field(default_factory=list)
    digest: str = ""
    last_update: bytes = b""


def go_time(t: dt.datetime) -> bytes:
    """A time in the binary form of Go's ``time.MarshalBinary`` (version 1, UTC): the router keeps
    it and sends it back with its next ``ListServices``."""
    delta = t - GO_EPOCH
    seconds = delta.days * 86400 + delta.seconds
    return (b"\x01" + seconds.to_bytes(8, "big", signed=True) + (delta.microseconds * 1000).to_bytes(4, "big")
            + (-1).to_bytes(2, "big", signed=True))


class Tunnel(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self.states: dict[str, TunnelState] = {}

    def handlers(self) -> dict[int, Handler]:
        return {C.CREATE_API_SESSION: self._create_api_session, C.LIST_SERVICES: self._list_services,
                C.CREATE_TUNNEL_TERMINATOR: self._create_terminator,
                C.CREATE_TUNNEL_TERMINATOR_V2: self._create_terminator_v2,
                C.REMOVE_TUNNEL_TERMINATOR: self._remove_terminator,
                C.UPDATE_TUNNEL_TERMINATOR: self._update_terminator, C.TUNNEL_HEALTH_EVENT: self._health}

    # ------------------------------------------------------------------ the router's identity
    def _identity(self, ch: RouterChannel) -> dict | None:
        return self.server.ctl.store.one(
            "SELECT * FROM identities WHERE id = ? AND type_id = 'Router'", (ch.router_id,))

    def _refuse(self, ch: RouterChannel, m: Message) -> None:
        log.info("router %s: tunneling not enabled", ch.label)
        ch.reply(m, C.ERROR, {H.ERROR_CODE: TUNNELING_NOT_ENABLED.to_bytes(4, "little")}, b"tunneling not enabled")

    def _api_session(self, ch: RouterChannel, identity: dict, state: TunnelState) -> bool:
        """The identity's API session, made when it has none that still exists; True if new."""
        store = self.server.ctl.store
        if state.api_session is not None and store.value(
                "SELECT 1 FROM api_sessions WHERE id = ? AND identity_id = ?", (state.api_session[0], identity["id"])):
            self.server.ctl.activity[state.api_session[1]] = clock.stamp()
            return False
        sid, token, now = new_sortable_id(), str(uuid.uuid4()), clock.stamp()
        with store.write():
            store.execute(
                "INSERT INTO api_sessions (id, created_at, updated_at, token, identity_id, authenticator_id,"
                " ip_address, config_types, last_activity_at) VALUES (?, ?, ?, ?, ?, '', ?, ?, ?)",
                (sid, now, now, token, identity["id"], ch.peer_name.rsplit(":", 1)[0],
                 json.dumps(state.config_types), now))
        state.api_session = (sid, token)
        log.info("router %s: tunneler API session %s", ch.label, sid)
        return True

    def _api_session_answer(self, identity: dict, state: TunnelState) -> dict:
        assert state.api_session is not None
        costs = json.loads(identity.get("service_hosting_costs") or "{}")
        precedences = json.loads(identity.get("service_hosting_precedences") or "{}")
        return {
            "sessionId": state.api_session[0], "token": state.api_session[1],
            "refreshIntervalSeconds": REFRESH_SECONDS, "identityId": identity["id"],
            "identityName": identity["name"],
            "defaultHostingPrecedence": messages.PRECEDENCE_CODE.get(identity["default_hosting_precedence"], 0),
            "defaultHostingCost": int(identity["default_hosting_cost"] or 0),
            "appDataJson": identity.get("app_data") or "",
            "servicePrecedences": {k: messages.PRECEDENCE_CODE.get(v, 0) for k, v in precedences.items()},
            "serviceCosts": {k: int(v) for k, v in costs.items()}}

    def _create_api_session(self, ch: RouterChannel, m: Message) -> None:
        identity = self._identity(ch)
        if identity is None:
            return self._refuse(ch, m)
        assert ch.router_id is not None
        state = self.states.setdefault(ch.router_id, TunnelState())
        state.config_types = pb.decode(messages.CREATE_API_SESSION, m.body)["configTypes"] or ["all"]
        self._api_session(ch, identity, state)
        ch.reply(m, C.CREATE_API_SESSION_RESPONSE, {},
                 pb.encode(messages.CREATE_API_SESSION_RESPONSE, self._api_session_answer(identity, state)))

    # ------------------------------------------------------------------ services
    def services(self, identity_id: str, config_types: list[str]) -> list[dict]:
        """What ``identity_id`` may reach, as the tunneler's service list shows it."""
        store = self.server.ctl.store
        rows = store.all(f"SELECT t.id, t.name, t.encryption_required, t.tags FROM services t WHERE {VISIBLE}"
                         " ORDER BY t.name", (identity_id,))
        ids = json.dumps([r["id"] for r in rows])
        perms: dict[str, set[str]] = {}
        for sid, kind in store.conn.execute(_PERMISSIONS, (identity_id, ids)):
            perms.setdefault(sid, set()).add(kind)
        wanted = set(config_types)
        configs: dict[str, dict[str, object]] = {}
        for query, params in ((_CONFIGS, (ids,)), (_OVERRIDES, (identity_id,))):   # overrides win
            for r in store.all(query, params):
                if "all" in wanted or r["type_id"] in wanted or r["type_name"] in wanted:
                    configs.setdefault(r["service_id"], {})[r["type_name"]] = json.loads(r["data"])
        return [{"id": r["id"], "name": r["name"], "permissions": sorted(perms.get(r["id"], ())),
                 "encryption": bool(r["encryption_required"]),
                 "config": json.dumps(configs.get(r["id"], {}), sort_keys=True).encode(),
                 "tags": (r["tags"] or "{}").encode()} for r in rows]

    def _list_services(self, ch: RouterChannel, m: Message) -> None:
        identity = self._identity(ch)
        if identity is None:
            log.info("router %s: service list asked without tunneling", ch.label)
            return
        assert ch.router_id is not None
        state = self.states.setdefault(ch.router_id, TunnelState())
        self._api_session(ch, identity, state)
        services = self.services(identity["id"], state.config_types or ["all"])
        digest = hashlib.sha256(repr(services).encode()).hexdigest()
        if digest != state.digest:
            state.digest, state.last_update = digest, go_time(clock.now())
        elif m.body == state.last_update:
            return   # nothing new since the list the router holds
        ch.send(C.SERVICE_LIST, {}, pb.encode(messages.SERVICES_LIST,
                                              {"lastUpdate": state.last_update, "services": services}))

    # ------------------------------------------------------------------ terminators
    def _bind_session(self, ch: RouterChannel, identity: dict, state: TunnelState, service_id: str,
                      wanted: str) -> checks.Session | None:
        """The Bind session of the router's identity for the service: the one it names if still
        valid, else its existing one, else a new one; None when the policies do not allow it."""
        assert state.api_session is not None and ch.router_id is not None
        store = self.server.ctl.store
        if not checks.allowed(store, identity["id"], service_id, ch.router_id, "Bind"):
            return None
        api_id = state.api_session[0]
        token = store.value("SELECT token FROM sessions WHERE api_session_id = ? AND service_id = ? AND type = 'Bind'"
                            " ORDER BY id = ? DESC", (api_id, service_id, wanted))
        if token is None:
            sid, now = new_id(), clock.stamp()
            # the tunneler's own session: a JWT for a v2.0 router, the opaque token a v1.x one expects
            token = service_tokens.mint(self.server.ctl, session_id=sid, api_session_id=api_id,
                                        identity_id=identity["id"], service_id=service_id, kind="Bind",
                                        legacy=True) if ch.group is not None else str(uuid.uuid4())
            with store.write():
                store.execute("INSERT INTO sessions (id, created_at, updated_at, token, api_session_id, identity_id,"
                              " service_id, type) VALUES (?, ?, ?, ?, ?, ?, ?, 'Bind')",
                              (sid, now, now, token, api_id, identity["id"], service_id))
        sess, _ = checks.session(self.server.ctl, token, "Bind", api_id, ch.router_id)
        return sess

    def _create_terminator(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.CREATE_TUNNEL_TERMINATOR, m.body)
        identity = self._identity(ch)
        if identity is None:
            return self._refuse(ch, m)
        assert ch.router_id is not None
        state = self.states.setdefault(ch.router_id, TunnelState())
        new_api_session = self._api_session(ch, identity, state)
        service_id = self.server.ctl.store.value("SELECT id FROM services WHERE name = ?", (req["serviceName"],))
        sess = self._bind_session(ch, identity, state, service_id, req["sessionId"]) if service_id else None
        if sess is None:   # upstream answers nothing here; the router tries again later
            log.warning("router %s: no Bind of service %r for its tunneler identity", ch.label, req["serviceName"])
            return
        try:
            tid = self.server.terminators.store(ch, req["address"], sess, "tunnel", req["address"], req)
        except Refused as e:
            return self.server.terminators.error(ch, m, str(e), e.code)
        answer: dict = {"session": {"sessionId": sess.id, "token": sess.token}, "terminatorId": tid,
                        "startTime": req["startTime"]}
        if new_api_session:
            answer["apiSession"] = self._api_session_answer(identity, state)
        ch.reply(m, C.CREATE_TUNNEL_TERMINATOR_RESPONSE, {},
                 pb.encode(messages.CREATE_TUNNEL_TERMINATOR_RESPONSE, answer))

    def _create_terminator_v2(self, ch: RouterChannel, m: Message) -> None:
        """A v2.0 tunneler's terminator (it found the service in the data model): checked against
        the Bind policies of the router's identity as the v1 request is; the answer is a message
        of its own (the router does not wait for a reply)."""
        req = pb.decode(messages.CREATE_TUNNEL_TERMINATOR_V2, m.body)
        answer: dict = {"terminatorId": req["address"], "startTime": req["startTime"]}
        identity = self._identity(ch)
        try:
            if identity is None:
                raise Refused("tunneling not enabled", code=TUNNELING_NOT_ENABLED)
            assert ch.router_id is not None
            state = self.states.setdefault(ch.router_id, TunnelState())
            self._api_session(ch, identity, state)
            service = req["serviceId"]
            exists = self.server.ctl.store.value("SELECT 1 FROM services WHERE id = ?", (service,))
            sess = self._bind_session(ch, identity, state, service, "") if exists else None
            if sess is None:
                raise Refused(f"service {service} not found or not bindable by the router's identity", code=6)
            self.server.terminators.store(ch, req["address"], sess, "tunnel", req["address"], req)
            answer["result"] = messages.TERMINATOR_OK
        except Refused as e:
            log.warning("router %s: tunnel terminator %s refused: %s", ch.label, req["address"], e)
            answer.update(result=e.result, msg=str(e), errorCode=e.code, retryHint=messages.RETRY_HINTS.get(e.code, 0))
        ch.send(C.CREATE_TUNNEL_TERMINATOR_V2_RESPONSE, {},
                pb.encode(messages.CREATE_TUNNEL_TERMINATOR_V2_RESPONSE, answer))

    def _remove_terminator(self, ch: RouterChannel, m: Message) -> None:
        tid = m.body.decode("utf-8", "replace")
        terms = self.server.terminators
        try:
            terms.own(ch, tid, "tunnel")
        except Refused as e:
            return terms.error(ch, m, str(e), e.code)
        assert ch.router_id is not None
        terms.remove(ch.router_id, [tid])
        ch.reply(m, C.REMOVE_TUNNEL_TERMINATOR_RESPONSE, {})

    def _update_terminator(self, ch: RouterChannel, m: Message) -> None:
        terms = self.server.terminators
        try:
            terms.update(ch, pb.decode(messages.UPDATE_TUNNEL_TERMINATOR, m.body), "tunnel")
        except Refused as e:
            return terms.error(ch, m, str(e), e.code)
        ch.reply(m, C.UPDATE_TUNNEL_TERMINATOR_RESPONSE, {})

    def _health(self, ch: RouterChannel, m: Message) -> None:
        self.server.terminators.health(m.text(messages.TUNNEL_TERMINATOR_ID), m.flag(messages.TUNNEL_CHECK_PASSED))
