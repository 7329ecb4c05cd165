"""What a real router must know of API sessions and sessions, kept in step with the database.

A router checks an SDK's hello against the API sessions the controller sent it (token and the
certificate fingerprints that may present it), so every connected router gets the full list when
it comes online (``ApiSessionAdded``, full state, instant-sync headers) and every change after:
a new or changed API session (login, a new session certificate) within a tick, a removed one
(logout, expiry, deletion, identity disabled or deleted) as ``ApiSessionRemoved``, after which
the router closes that session's SDK channels. Sessions a router has used (its terminators'
Bind sessions, its circuits' Dial sessions) that are deleted or lose their policies are sent as
``SessionRemoved``. The router's ``ApiSessionHeartbeat`` keeps the API sessions of its connected
SDKs alive, as the embedded router does for its own, and its ``ConnectEvents`` say which
identities have SDKs connected to it.

Changes are found by polling the database's change counters every tick (0.2 s) and diffing, so
no write path has to remember to notify: whatever removes an API session, routers hear of it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING

from .. import clock
from ..auth import sessions as auth_sessions
from ..channel.wire import Message
from ..routing import checks
from . import messages, pb
from .messages import C
from .part import Handler, Part

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

CHUNK = 500   # API sessions per full-state message

# every API session a router may accept, with the fingerprints that may present it: the
# identity's certificate authenticators and the session's own certificates still valid (API
# sessions first: CROSS JOIN keeps that order; statistics taken while there were none made
# SQLite scan every identity instead, 26 ms a tick at 100,000 identities)
_API_SESSIONS = (
    "SELECT a.id, a.token, a.identity_id, a.is_mfa_required, a.is_mfa_complete, p.secondary,"
    " (SELECT group_concat(fp, ' ') FROM ("
    "   SELECT fingerprint AS fp FROM authenticators WHERE identity_id = a.identity_id AND fingerprint IS NOT NULL"
    "   UNION SELECT fingerprint FROM api_session_certificates WHERE api_session_id = a.id AND valid_to > ?1"
    "   ORDER BY 1)) AS fps"
    " FROM api_sessions a CROSS JOIN identities i ON i.id = a.identity_id"
    " LEFT JOIN auth_policies p ON p.id = i.auth_policy_id"
    " WHERE i.disabled_at IS NULL OR (i.disabled_until IS NOT NULL AND i.disabled_until <= ?1)")

ApiSessions = dict[str, tuple[str, str, tuple[str, ...]]]   # id -> (token, identity id, fingerprints)


class Sync(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self._gen: tuple | None = None

    def handlers(self) -> dict[int, Handler]:
        return {C.API_SESSION_HEARTBEAT: self._heartbeat, C.VALIDATE_SESSIONS: self._validate_sessions,
                C.CONNECT_EVENTS: self._connect_events}

    # ------------------------------------------------------------------ API sessions
    def current(self) -> ApiSessions:
        """Every complete API session of an enabled identity (one still owing TOTP is not sent)."""
        out: ApiSessions = {}
        for row in self.server.ctl.store.all(_API_SESSIONS, (clock.stamp(),)):
            if auth_sessions.totp_outstanding(row, auth_sessions.parse_secondary(row["secondary"])):
                continue
            out[row["id"]] = (row["token"], row["identity_id"], tuple((row["fps"] or "").split()))
        return out

    def router_ready(self, ch: RouterChannel) -> None:
        """The full state for a router that just sent its ClientHello."""
        now = self.current()
        items = list(now.items())
        sync_id = f"{time.time_ns():020d}"
        chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)] or [[]]
        for seq, chunk in enumerate(chunks):
            self._send_added(ch, chunk, full=True, sync_id=sync_id, seq=seq, last=seq == len(chunks) - 1)
        ch.api_sessions = now

    def _send_added(self, ch: RouterChannel, items, full: bool, sync_id: str = "", seq: int = 0,
                    last: bool = True) -> None:
        body = pb.encode(messages.API_SESSION_ADDED, {"isFullState": full, "apiSessions": [
            {"token": token, "certFingerprints": list(fps), "id": sid, "identityId": identity}
            for sid, (token, identity, fps) in items]})
        state = json.dumps({"id": sync_id or f"{time.time_ns():020d}", "isLast": last, "sequence": seq})
        ch.send(C.API_SESSION_ADDED, {messages.H.SYNC_STRATEGY: b"instant", messages.H.SYNC_STATE: state.encode()},
                body)

    def tick(self) -> None:
        store = self.server.ctl.store
        gen = (*store.generation(), len(self.server.routers))
        if gen == self._gen:
            return
        self._gen = gen
        self._check_routers()
        ready = [ch for ch in self.server.routers.values() if ch.ready and not ch.closed]
        if not ready:
            return
        now = self.current()
        for ch in ready:
            sent = ch.api_sessions
            added = [(sid, v) for sid, v in now.items() if sent.get(sid) != v]
            gone = [sid for sid in sent if sid not in now]
            if added:
                self._send_added(ch, added, full=False)
            if gone:
                ch.send(C.API_SESSION_REMOVED, {}, pb.encode(messages.TOKENS_AND_IDS, {
                    "tokens": [sent[sid][0] for sid in gone], "ids": gone}))
            ch.api_sessions = now
            self._check_sessions(ch)
        # measured after our own writes, so that they do not count as news next time
        self._gen = (*store.generation(), len(self.server.routers))

    def _check_routers(self) -> None:
        """Disconnect routers deleted, disabled or re-enrolled since they connected."""
        routers = self.server.routers
        rows = {r["id"]: r for r in self.server.ctl.store.all(
            "SELECT id, fingerprint, disabled FROM routers WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(routers)),))}
        for rid, ch in list(routers.items()):
            row = rows.get(rid)
            reason = ("router deleted" if row is None else "router disabled" if row["disabled"]
                      else "router re-enrolled" if row["fingerprint"] not in ch.fingerprints else "")
            if reason:
                log.info("router %s: %s; disconnecting", ch.label, reason)
                ch.close(reason)

    # ------------------------------------------------------------------ sessions
    def used(self, ch: RouterChannel, sess: checks.Session) -> None:
        """A router presented ``sess`` (a Bind or a Dial): tell it when the session goes."""
        ch.sessions[sess.token] = (sess.id, (sess.identity_id, sess.service_id, sess.type))

    def _check_sessions(self, ch: RouterChannel) -> None:
        if not ch.sessions or ch.router_id is None:
            return
        live = {sid: grant for sid, grant in ch.sessions.values()}
        revoked = checks.reconcile(self.server.ctl, ch.router_id, set(), live, set())
        if not revoked.sessions:
            return
        gone = [(token, sid) for token, (sid, _) in ch.sessions.items() if sid in revoked.sessions]
        for token, _ in gone:
            del ch.sessions[token]
        ch.send(C.SESSION_REMOVED, {}, pb.encode(messages.TOKENS_AND_IDS, {
            "tokens": [t for t, _ in gone], "ids": [s for _, s in gone]}))
        # routers close nothing of a JWT session on SessionRemoved but (v2) its Bind terminators:
        # the circuits of its dials are unrouted here, on every router of their path
        circuits = self.server.circuits
        for cid in [c.id for c in circuits.live.values() if c.session_id in revoked.sessions]:
            circuits.end(cid, now=True)
        log.info("router %s: %d session(s) removed", ch.label, len(gone))

    # ------------------------------------------------------------------ router messages
    def _heartbeat(self, ch: RouterChannel, m: Message) -> None:
        """The API sessions of SDKs connected to the router stay alive."""
        try:
            tokens = pb.decode(messages.API_SESSION_HEARTBEAT, m.body)["tokens"]
        except pb.PbError:
            return
        known = {v[0] for v in ch.api_sessions.values()}
        stamp = clock.stamp()
        activity = self.server.ctl.activity
        for token in tokens:
            if token in known:
                activity[token] = stamp

    def _connect_events(self, ch: RouterChannel, m: Message) -> None:
        """Which identities have SDKs connected to the router (``hasEdgeRouterConnection``)."""
        msg = pb.decode(messages.CONNECT_EVENTS, m.body)
        if msg["fullState"]:
            ch.connected.clear()
        for e in msg["events"]:
            if e["isConnected"]:
                ch.connected.add(e["identityId"])
            else:
                ch.connected.discard(e["identityId"])

    def _validate_sessions(self, ch: RouterChannel, m: Message) -> None:
        """After a reconnect the router lists the sessions it holds (v1: their tokens, v2: their
        ids): the gone ones are removed, named both ways (v2 routers match ids, v1 tokens)."""
        try:
            named = pb.decode(messages.VALIDATE_SESSIONS, m.body)["sessionTokens"]
        except pb.PbError:
            return
        if not named:
            return
        present = set(self.server.ctl.store.column(
            "SELECT value FROM json_each(?1) WHERE value IN (SELECT token FROM sessions)"
            " OR value IN (SELECT id FROM sessions)", (json.dumps(named),)))
        gone = [t for t in named if t not in present]
        if gone:
            ch.send(C.SESSION_REMOVED, {}, pb.encode(messages.TOKENS_AND_IDS, {"tokens": gone, "ids": gone}))
