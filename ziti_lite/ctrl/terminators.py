"""Terminators that real routers create, update and remove for the SDKs that bind through them.

A router asks the controller to create a terminator when an SDK binds a service on it
(``CreateTerminatorV2`` with the id the router chose, or V1 where the controller chooses). The
request is checked as upstream's controller checks it (the Bind session, one of the client's
certificates on its API session, the policies that let the identity use this router for the
service, cost at most 65535) and stored in the ``terminators`` table with the router, binding
``edge``, the hosting identity, cost, precedence and instance id, so both APIs list it and dials
through any router find it. An existing id is accepted again when it matches (a router re-sends
its terminators after reconnecting). The host's peer data (its public key) is kept in memory:
the router re-sends it whenever it connects. Terminators go when the router removes them, when
their Bind session goes (``sync.py``), and with the router or the service (foreign keys).
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from typing import TYPE_CHECKING

from .. import clock
from ..channel.wire import Message
from ..routing import checks, strategy
from . import messages, pb
from .messages import C
from .part import Handler, Part

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

MAX_COST = 65535


class Refused(Exception):
    """A terminator request that fails: the message and the V2 result code."""

    def __init__(self, message: str, result: int = messages.TERMINATOR_OTHER, code: int = 1):
        super().__init__(message)
        self.result, self.code = result, code


class Terminators(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self.peer_data: dict[str, dict[int, bytes]] = {}    # terminator id -> the host's peer data
        self.session_of: dict[str, str] = {}                # terminator id -> its Bind session token
        self.failures: dict[str, int] = {}                  # terminator id -> dial failure penalty

    def handlers(self) -> dict[int, Handler]:
        return {C.CREATE_TERMINATOR_V2: self._create_v2, C.CREATE_TERMINATOR: self._create_v1,
                C.REMOVE_TERMINATORS: self._remove_many, C.REMOVE_TERMINATOR: self._remove_v1,
                C.UPDATE_TERMINATOR: self._update, C.HEALTH_EVENT: self._health}

    # ------------------------------------------------------------------ create
    def _bind_session(self, ch: RouterChannel, token: str, fingerprints: list[str]) -> checks.Session:
        assert ch.router_id is not None
        sess, err = checks.router_session(self.server.ctl, token, "Bind", fingerprints, ch.router_id)
        if sess is None:
            result = messages.TERMINATOR_INVALID_SESSION if err == checks.INVALID_SESSION else messages.TERMINATOR_OTHER
            raise Refused(err, result, checks.ERROR_CODES.get(err, 1))
        return sess

    def create(self, ch: RouterChannel, tid: str, req: dict) -> str:
        """Check and store one terminator of an SDK's Bind; returns its id or raises ``Refused``."""
        if not tid:
            raise Refused("provided terminator id is blank", code=8)
        sess = self._bind_session(ch, req["sessionToken"], req["fingerprints"])
        return self.store(ch, tid, sess, "edge", req.get("address") or tid, req)

    def store(self, ch: RouterChannel, tid: str, sess: checks.Session, binding: str, address: str, req: dict) -> str:
        """Store a checked terminator (``req``: cost, precedence, instance id and secret, peer
        data); an existing id is accepted when it is the same terminator (updated)."""
        if req["cost"] > MAX_COST:
            raise Refused(f"invalid cost {req['cost']}. cost must be between 0 and {MAX_COST} inclusive", code=10)
        precedence = messages.PRECEDENCE.get(req["precedence"], "default")
        store = self.server.ctl.store
        now = clock.stamp()
        with store.write():
            row = store.one("SELECT service_id, router_id, binding, host_id, cost, precedence FROM terminators"
                            " WHERE id = ?", (tid,))
            if row is not None:
                for field, mine, what in (("binding", binding, "binding"), ("service_id", sess.service_id, "service"),
                                          ("router_id", ch.router_id, "router"), ("host_id", sess.identity_id,
                                                                                  "identity")):
                    if row[field] != mine:
                        raise Refused(f"selected id conflicts with terminator for different {what}",
                                      messages.TERMINATOR_ID_CONFLICT)
                if (row["cost"], row["precedence"]) != (req["cost"], precedence):
                    store.execute("UPDATE terminators SET cost = ?, precedence = ?, updated_at = ? WHERE id = ?",
                                  (req["cost"], precedence, now, tid))
            else:
                secret = base64.b64encode(req["instanceSecret"]).decode() if req["instanceSecret"] else None
                store.execute(
                    "INSERT INTO terminators (id, created_at, updated_at, is_system, service_id, router_id, binding,"
                    " address, instance_id, instance_secret, cost, precedence, host_id)"
                    " VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (tid, now, now, sess.service_id, ch.router_id, binding, address, req["instanceId"], secret,
                     req["cost"], precedence, sess.identity_id))
                log.info("router %s: %s terminator %s for service %s (host %s)", ch.label, binding, tid,
                         sess.service_name, sess.identity_name)
        self.peer_data[tid] = dict(req["peerData"])
        self.session_of[tid] = sess.token
        self.server.sync.used(ch, sess)
        return tid

    def _create_v2(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.CREATE_TERMINATOR_V2, m.body)
        try:
            tid = self.create(ch, req["address"], req)
            answer = {"terminatorId": tid, "result": messages.TERMINATOR_OK}
        except Refused as e:
            log.warning("router %s: terminator %s refused: %s", ch.label, req["address"], e)
            answer = {"terminatorId": req["address"], "result": e.result, "msg": str(e), "errorCode": e.code,
                      "retryHint": messages.RETRY_HINTS.get(e.code, 0)}
        ch.reply(m, C.CREATE_TERMINATOR_V2_RESPONSE, {}, pb.encode(messages.CREATE_TERMINATOR_V2_RESPONSE, answer))

    def _create_v1(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.CREATE_TERMINATOR, m.body)
        tid = str(uuid.uuid4())
        try:
            self.create(ch, tid, {**req, "address": "hosted:" + req["sessionToken"]})
        except Refused as e:
            return self.error(ch, m, str(e), e.code)
        ch.reply(m, C.CREATE_TERMINATOR_RESPONSE, {}, tid.encode())

    # ------------------------------------------------------------------ remove / update
    def remove(self, router_id: str, ids: list[str]) -> int:
        """Delete this router's terminators among ``ids`` (unknown ids are fine: already gone)."""
        for tid in ids:
            self.forget(tid)
        if not ids:
            return 0
        store = self.server.ctl.store
        with store.write():
            store.execute("DELETE FROM terminators WHERE router_id = ? AND id IN (SELECT value FROM json_each(?))",
                          (router_id, json.dumps(ids)))
            return store.conn.changes()

    def forget(self, tid: str) -> None:
        self.peer_data.pop(tid, None)
        self.session_of.pop(tid, None)
        self.failures.pop(tid, None)

    def _remove_many(self, ch: RouterChannel, m: Message) -> None:
        assert ch.router_id is not None
        ids = pb.decode(messages.REMOVE_TERMINATORS, m.body)["terminatorIds"]
        self.remove(ch.router_id, ids)
        ch.result(m, True)

    def own(self, ch: RouterChannel, tid: str, binding: str = "edge") -> dict:
        row = self.server.ctl.store.one("SELECT id, router_id, binding FROM terminators WHERE id = ?", (tid,))
        if row is None:
            raise Refused("invalid terminator: not found", code=8)
        if row["router_id"] != ch.router_id:
            raise Refused(f"request for terminator {tid} on router {row['router_id']} came from router"
                          f" {ch.router_id}", code=8)
        if row["binding"] != binding:
            raise Refused(f"can't operate on terminator {tid} with wrong binding, expected binding {binding},"
                          f" was {row['binding']} ", code=8)
        return row

    def _remove_v1(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.REMOVE_TERMINATOR, m.body)
        try:
            self._bind_session(ch, req["sessionToken"], req["fingerprints"])
            self.own(ch, req["terminatorId"])
        except Refused as e:
            return self.error(ch, m, str(e), e.code)
        assert ch.router_id is not None
        self.remove(ch.router_id, [req["terminatorId"]])
        ch.reply(m, C.REMOVE_TERMINATOR_RESPONSE, {})

    def _update(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.UPDATE_TERMINATOR, m.body)
        try:
            self._bind_session(ch, req["sessionToken"], req["fingerprints"])
            self.update(ch, req, "edge")
        except Refused as e:
            return self.error(ch, m, str(e), e.code)
        ch.reply(m, C.UPDATE_TERMINATOR_RESPONSE, {})

    def update(self, ch: RouterChannel, req: dict, binding: str) -> None:
        """Cost and precedence of one of the router's terminators, as the request asks."""
        self.own(ch, req["terminatorId"], binding)
        values: dict[str, object] = {}
        if req["updateCost"]:
            if req["cost"] > MAX_COST:
                raise Refused(f"invalid cost {req['cost']}. cost must be between 0 and {MAX_COST} inclusive",
                              code=10)
            values["cost"] = req["cost"]
        if req["updatePrecedence"]:
            if req["precedence"] not in messages.PRECEDENCE:
                raise Refused(f"invalid precedence: {req['precedence']}", code=9)
            values["precedence"] = messages.PRECEDENCE[req["precedence"]]
        if values:
            store = self.server.ctl.store
            with store.write():
                store.execute(f"UPDATE terminators SET {', '.join(f'{k} = ?' for k in values)}, updated_at = ?"
                              " WHERE id = ?", (*values.values(), clock.stamp(), req["terminatorId"]))

    def health(self, tid: str, passed: bool) -> None:
        """A host reports its service healthy or not: an unhealthy terminator is tried last."""
        if tid in self.session_of:
            self.failures[tid] = strategy.penalised(self.failures.get(tid, 0), "healthy" if passed else "unhealthy")

    def _health(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.HEALTH_EVENT, m.body)
        self.health(req["terminatorId"], req["checkPassed"])

    def error(self, ch: RouterChannel, m: Message, text: str, code: int) -> None:
        """An ``ErrorType`` answer: the text in the body, the edge error code in header 1014."""
        log.warning("router %s: %s refused: %s", ch.label, m.content, text)
        ch.reply(m, C.ERROR, {messages.H.ERROR_CODE: code.to_bytes(4, "little")}, text.encode())

