"""The router data model: the state a v2.0 router authorises bind and dial with, and its changes.

A v2.0 router subscribes (``SubscribeToDataModelRequest``) as soon as its hello is answered and
verifies every service token and OIDC access token against the public keys of this model, and
the OIDC sessions' policies against its identities, services, posture checks and service
policies. So the controller keeps one model for all routers: read from the database into one
encoded event per entity (config types, configs, identities, services, posture checks, service
policies with their identity, service and posture-check links, public keys, revocations), and
re-read when the database's generation moves (at most every tick, 0.2 s, and only while a router
is subscribed). The difference to the last reading becomes a change set with the next index,
sent to every subscriber; a subscriber gets the full state (``DataState``), or, when it names
our timeline and an index we still hold the change sets after, just those.

Entities keep their encoded bytes while their row is unchanged, so a re-read costs the SQL and
a tuple comparison per row. Revocations: an API session that goes (logout, deletion, expiry) is
revoked for as long as an access token naming it may live, an identity disabled or deleted is
revoked as of now, and the revocation list (``revocations``: OpenZiti 2.0's entity, token ids,
API sessions and identities) is sent with each entry's type, an identity's with its cut-off.
Facts: ``shared/reference/behaviour/ctrl-channel-v2.md`` §4.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import clock
from ..auth import certs as certauth
from ..channel.wire import Message
from ..pki import ca as pki
from . import messages, pb
from .messages import C, H
from .part import Handler, Part
from .pb import Field, Msg

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

HISTORY = 256            # change sets kept for subscribers that catch up from their index

# event kinds in the order a full state lists them (a link needs its policy and its entities)
CONFIG_TYPE, CONFIG, IDENTITY, SERVICE, POSTURE_CHECK, POLICY, PUBLIC_KEY, REVOCATION = range(8)
_MODEL: dict[int, tuple[int, Msg]] = {     # kind -> (Event field number, model table)
    CONFIG_TYPE: (17, messages.RDM_CONFIG_TYPE), CONFIG: (18, messages.RDM_CONFIG),
    IDENTITY: (10, messages.RDM_IDENTITY), SERVICE: (11, messages.RDM_SERVICE),
    POSTURE_CHECK: (13, messages.RDM_POSTURE_CHECK), POLICY: (12, messages.RDM_SERVICE_POLICY),
    PUBLIC_KEY: (14, messages.RDM_PUBLIC_KEY), REVOCATION: (15, messages.RDM_REVOCATION)}
_WRAP = {kind: Msg("Event", (Field(1, "action", "enum"), Field(3, "isSynthetic", "bool"), Field(num, "m", "bytes")))
         for kind, (num, _) in _MODEL.items()}
_PRECEDENCE = {"default": 0, "required": 1, "failed": 2}
_RELATED = ((messages.RDM_RELATED_SERVICE, "service_policy_services", "service_id"),
            (messages.RDM_RELATED_POSTURE_CHECK, "service_policy_posture_checks", "posture_check_id"),
            (messages.RDM_RELATED_IDENTITY, "service_policy_identities", "identity_id"))

Key = tuple[int, str]
Links = dict[str, dict[int, frozenset[str]]]     # policy id -> related type -> entity ids


def event(kind: int, action: int, model: bytes, synthetic: bool = False) -> bytes:
    return pb.encode(_WRAP[kind], {"action": action, "isSynthetic": synthetic, "m": model})


def link_event(policy_id: str, related: int, ids: Iterable[str], add: bool) -> bytes:
    model = pb.encode(messages.RDM_POLICY_CHANGE, {"policyId": policy_id, "relatedEntityIds": sorted(ids),
                                                   "relatedEntityType": related, "add": add})
    return pb.encode(Msg("Event", (Field(1, "action", "enum"), Field(16, "m", "bytes"))),
                     {"action": messages.RDM_ACTION_CREATE, "m": model})


def _stamp(seconds: float) -> dict:
    return {"seconds": int(seconds), "nanos": int((seconds % 1) * 1e9)}


def _json(text: str | None, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


@dataclass
class Reading:
    """One reading of the database: every entity's encoded model, and the policies' links."""
    models: dict[Key, bytes] = field(default_factory=dict)
    links: Links = field(default_factory=dict)
    api_sessions: set[str] = field(default_factory=set)
    disabled: set[str] = field(default_factory=set)


class DataModel(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self.timeline = os.urandom(8).hex()
        self.index = 0
        self.current: Reading | None = None
        self.history: deque[tuple[int, bytes]] = deque(maxlen=HISTORY)   # (index, encoded ChangeSet)
        self.subscribers: dict[RouterChannel, str] = {}                  # channel -> subscription id
        self.revoked: dict[str, tuple[str, float, float]] = {}           # id -> (type, expires, issued before)
        self.keys: dict[str, bytes] = {}                                 # kid -> certificate DER
        self._rows: dict[Key, tuple[tuple, bytes]] = {}                  # row values -> encoded model
        self._gen: tuple | None = None
        self._read_at = 0.0
        self._signing_kids: set[str] = set()                             # kids of server certificates
        self.changes_sent = 0

    def handlers(self) -> dict[int, Handler]:
        return {C.SUBSCRIBE_TO_DATA_MODEL: self._subscribe}

    # ------------------------------------------------------------------ reading the database
    def _encode(self, kind: int, row_id: str, row: tuple, build) -> tuple[Key, bytes]:
        key = (kind, row_id)
        kept = self._rows.get(key)
        if kept is not None and kept[0] == row:
            return key, kept[1]
        data = pb.encode(_MODEL[kind][1], build())
        self._rows[key] = (row, data)
        return key, data

    def read(self) -> Reading:
        """The model as the database has it now."""
        store = self.server.ctl.store
        now = clock.stamp()
        out = Reading()
        models = out.models
        for r in store.all("SELECT id, name FROM config_types"):
            k, v = self._encode(CONFIG_TYPE, r["id"], tuple(r.values()), lambda r=r: r)
            models[k] = v
        for r in store.all("SELECT id, config_type_id, name, data FROM configs"):
            k, v = self._encode(CONFIG, r["id"], tuple(r.values()), lambda r=r: {
                "id": r["id"], "typeId": r["config_type_id"], "name": r["name"],
                "dataJson": json.dumps(_json(r["data"], {}), separators=(",", ":"))})
            models[k] = v
        overrides: dict[str, dict[str, dict[str, str]]] = {}
        for r in store.all("SELECT identity_id, service_id, config_type_id, config_id FROM identity_service_configs"):
            overrides.setdefault(r["identity_id"], {}).setdefault(r["service_id"], {})[r["config_type_id"]] = \
                r["config_id"]
        for r in store.all(
                "SELECT id, name, default_hosting_precedence, default_hosting_cost, service_hosting_precedences,"
                " service_hosting_costs, app_data,"
                " (disabled_at IS NOT NULL AND (disabled_until IS NULL OR disabled_until > ?)) AS disabled"
                " FROM identities", (now,)):
            if r["disabled"]:
                out.disabled.add(r["id"])
            own = overrides.get(r["id"], {})
            k, v = self._encode(IDENTITY, r["id"], (*r.values(), json.dumps(own, sort_keys=True) if own else ""),
                                lambda r=r, own=own: _identity(r, own))
            models[k] = v
        for r in store.all("SELECT id, name, encryption_required, configs FROM services"):
            k, v = self._encode(SERVICE, r["id"], tuple(r.values()), lambda r=r: {
                "id": r["id"], "name": r["name"], "encryptionRequired": bool(r["encryption_required"]),
                "configs": _json(r["configs"], [])})
            models[k] = v
        for r in store.all("SELECT * FROM posture_checks"):
            k, v = self._encode(POSTURE_CHECK, r["id"], tuple(r.values()), lambda r=r: _posture_check(r))
            models[k] = v
        for r in store.all("SELECT id, name, type FROM service_policies"):
            k, v = self._encode(POLICY, r["id"], tuple(r.values()), lambda r=r: {
                "id": r["id"], "name": r["name"],
                "policyType": messages.RDM_POLICY_DIAL if r["type"] == "Dial" else messages.RDM_POLICY_BIND})
            models[k] = v
            out.links[r["id"]] = {}
        for related, table, column in _RELATED:
            grouped: dict[str, set[str]] = {}
            for row in store.all(f"SELECT policy_id, {column} AS entity FROM {table}"):  # noqa: S608
                grouped.setdefault(row["policy_id"], set()).add(row["entity"])
            for policy_id, ids in grouped.items():
                if policy_id in out.links:
                    out.links[policy_id][related] = frozenset(ids)
        for kid, der in self._public_keys().items():
            usages = [messages.RDM_KEY_JWT, messages.RDM_KEY_CLIENT_CERT] if kid in self._signing_kids \
                else [messages.RDM_KEY_CLIENT_CERT]
            models[(PUBLIC_KEY, kid)] = pb.encode(messages.RDM_PUBLIC_KEY, {
                "data": der, "kid": kid, "usages": usages, "format": messages.RDM_KEY_FORMAT_X509_DER})
        out.api_sessions = set(store.column("SELECT id FROM api_sessions"))
        return out

    def _public_keys(self) -> dict[str, bytes]:
        """The server certificate (it signs the JWTs: its SHA-1 is their ``kid``) and the
        controller's CAs. A renewal re-issues the server certificate with the same key, so a
        replaced one stays published: session tokens signed under its kid live as long as their
        API session. The renewal keeps replaced ones in the database (a restart publishes them
        again); this process keeps every one it published."""
        ctl = self.server.ctl
        for pem in (*certauth.previous_server_certs(ctl), certauth.server_keypair(ctl).cert_pem):
            der = pki.cert_der(pem)
            kid = pki.fingerprint(der)
            self._signing_kids.add(kid)
            self.keys[kid] = der
        for pem in certauth.controller_cas(ctl):
            der = pki.cert_der(pem)
            self.keys.setdefault(pki.fingerprint(der), der)
        return self.keys

    def _revocations(self, before: Reading | None, after: Reading) -> dict[Key, bytes]:
        """Revocations now in force: API sessions and identities that went since ``before``, and
        the OIDC provider's revoked token ids."""
        now = time.time()
        life = self.server.ctl.settings.oidc_access_seconds
        if before is not None:
            for sid in before.api_sessions - after.api_sessions:
                self.revoked[sid] = ("API_SESSION", now + life, 0.0)
            gone = {k[1] for k in before.models if k[0] == IDENTITY and (IDENTITY, k[1]) not in after.models}
            for iid in gone | (after.disabled - before.disabled):
                self.revoked[iid] = ("IDENTITY", now + life, now)
        self.revoked = {k: v for k, v in self.revoked.items() if v[1] > now}
        out: dict[Key, bytes] = {}
        for rid, (kind, expires, issued) in self.revoked.items():
            out[(REVOCATION, rid)] = pb.encode(messages.RDM_REVOCATION, {
                "id": rid, "expiresAt": _stamp(expires), "type": kind,
                "issuedBefore": _stamp(issued) if issued else None})
        # the revocation list (/revocations and the provider's own): an IDENTITY entry's cut-off
        # (issuedBefore) is when it was made
        for r in self.server.ctl.store.all("SELECT id, type, created_at, expires_at FROM revocations"
                                           " WHERE expires_at >= ?", (clock.stamp(),)):
            expires = clock.parse(r["expires_at"]).timestamp()
            issued = clock.parse(r["created_at"]).timestamp() if r["type"] == "IDENTITY" else 0.0
            out[(REVOCATION, r["id"])] = pb.encode(messages.RDM_REVOCATION, {
                "id": r["id"], "expiresAt": _stamp(expires), "type": r["type"],
                "issuedBefore": _stamp(issued) if issued else None})
        return out

    # ------------------------------------------------------------------ changes
    def tick(self, force: bool = False) -> None:
        """Re-read when the database moved (or every 30 s: time disables and revocations end)
        and send the difference to every subscriber."""
        if not self.subscribers and not force:
            return
        store = self.server.ctl.store
        gen = store.generation()
        if gen == self._gen and time.monotonic() - self._read_at < 30 and not force:
            return
        self._gen, self._read_at = gen, time.monotonic()
        before = self.current
        after = self.read()
        after.models.update(self._revocations(before, after))
        self.current = after
        if before is None:
            return
        changes = diff(before, after)
        if not changes:
            return
        self.index += 1
        body = pb.encode(messages.CHANGE_SET, {"index": self.index, "changes": changes,
                                               "previousIndex": self.index - 1})
        self.history.append((self.index, body))
        for ch, sub in list(self.subscribers.items()):
            self._send(ch, C.DATA_STATE_CHANGE_SET, sub, body)
        self.changes_sent += 1

    def _send(self, ch: RouterChannel, content: int, subscription: str, body: bytes) -> None:
        if ch.closed:
            self.subscribers.pop(ch, None)
            return
        ch.send(content, {H.RDM_SUBSCRIPTION_ID: subscription.encode()} if subscription else {}, body)

    def full_state(self) -> bytes:
        """The whole model as one ``DataState`` (its ``endIndex`` is the current index)."""
        if self.current is None:
            self.tick(force=True)
        assert self.current is not None
        return encode_state(self.current, self.index, self.timeline)

    # ------------------------------------------------------------------ subscriptions
    def _subscribe(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.SUBSCRIBE_TO_DATA_MODEL, m.body)
        sub = req["subscriptionId"]
        known = self.subscribers.get(ch)
        self.subscribers[ch] = sub
        self.tick()
        if self.current is None:
            self.tick(force=True)
        have, timeline = req["currentIndex"], req["timelineId"]
        if req["renew"] and known == sub and timeline == self.timeline and have == self.index:
            return      # a renewal of an up-to-date subscription
        missed = [body for index, body in self.history if index > have]
        # our timeline: the router holds our state as of its index (0: the full state sent at 0)
        if timeline == self.timeline and have <= self.index and \
                (have == self.index or (missed and self.history[0][0] <= have + 1)):
            for body in missed:
                self._send(ch, C.DATA_STATE_CHANGE_SET, sub, body)
            log.info("router %s: data model caught up from index %d to %d", ch.label, have, self.index)
            return
        self._send(ch, C.DATA_STATE, sub, self.full_state())
        log.info("router %s: data model sent (index %d, %d entities)", ch.label, self.index,
                 len(self.current.models) if self.current else 0)

    def channel_lost(self, ch: RouterChannel) -> None:
        self.subscribers.pop(ch, None)


def encode_state(reading: Reading, index: int, timeline: str) -> bytes:
    events: list[bytes] = []
    by_kind: dict[int, list[tuple[str, bytes]]] = {}
    for (kind, eid), data in reading.models.items():
        by_kind.setdefault(kind, []).append((eid, data))
    for kind in range(8):
        for eid, data in sorted(by_kind.get(kind, ())):
            events.append(event(kind, messages.RDM_ACTION_CREATE, data))
            if kind == POLICY:
                for related, ids in sorted(reading.links.get(eid, {}).items()):
                    if ids:
                        events.append(link_event(eid, related, ids, True))
    return pb.encode(messages.DATA_STATE, {"events": events, "endIndex": index, "timelineId": timeline})


def diff(before: Reading, after: Reading) -> list[bytes]:
    """The events that turn ``before`` into ``after``: creations and updates in dependency order,
    then deletions in reverse (a policy's links go before the policy)."""
    changed: dict[int, list[Key]] = {}
    for key, data in after.models.items():
        relinked = key[0] == POLICY and before.links.get(key[1]) != after.links.get(key[1])
        if before.models.get(key) != data or relinked:
            changed.setdefault(key[0], []).append(key)
    gone: dict[int, list[Key]] = {}
    for key in before.models.keys() - after.models.keys():
        gone.setdefault(key[0], []).append(key)
    out: list[bytes] = []
    for kind in range(8):
        for key in sorted(changed.get(kind, ())):
            old = before.models.get(key)
            if old != after.models[key]:
                action = messages.RDM_ACTION_CREATE if old is None else messages.RDM_ACTION_UPDATE
                out.append(event(kind, action, after.models[key]))
            if kind == POLICY:
                out += _link_changes(key[1], before.links.get(key[1], {}), after.links.get(key[1], {}))
    for kind in reversed(range(8)):
        for key in sorted(gone.get(kind, ())):
            if kind == POLICY:
                out += _link_changes(key[1], before.links.get(key[1], {}), {})
            out.append(event(kind, messages.RDM_ACTION_DELETE, before.models[key]))
    return out


def _link_changes(policy_id: str, old: dict[int, frozenset[str]], new: dict[int, frozenset[str]]) -> list[bytes]:
    out = []
    for related, _, _ in _RELATED:
        was, now = old.get(related, frozenset()), new.get(related, frozenset())
        if now - was:
            out.append(link_event(policy_id, related, now - was, True))
        if was - now:
            out.append(link_event(policy_id, related, was - now, False))
    return out


def _identity(r: dict, own: dict[str, dict[str, str]]) -> dict:
    app = _json(r["app_data"], {})
    return {
        "id": r["id"], "name": r["name"],
        "defaultHostingPrecedence": _PRECEDENCE.get(r["default_hosting_precedence"], 0),
        "defaultHostingCost": r["default_hosting_cost"],
        "serviceHostingPrecedences": {k: _PRECEDENCE.get(v, 0) for k, v in
                                      _json(r["service_hosting_precedences"], {}).items()},
        "serviceHostingCosts": {k: int(v) for k, v in _json(r["service_hosting_costs"], {}).items()},
        "appDataJson": json.dumps(app, separators=(",", ":")).encode() if app else b"",
        "serviceConfigs": {sid: {"configs": configs} for sid, configs in own.items()},
        "disabled": bool(r["disabled"])}


def _posture_check(r: dict) -> dict:
    out: dict[str, Any] = {"id": r["id"], "name": r["name"], "typeId": r["type_id"]}
    kind = r["type_id"]
    if kind == "MAC":
        out["mac"] = {"macAddresses": _json(r["mac_addresses"], [])}
    elif kind == "MFA":
        out["mfa"] = {"timeoutSeconds": r["timeout_seconds"] or 0, "promptOnWake": bool(r["prompt_on_wake"]),
                      "promptOnUnlock": bool(r["prompt_on_unlock"]),
                      "ignoreLegacyEndpoints": bool(r["ignore_legacy_endpoints"])}
    elif kind == "OS":
        out["osList"] = {"osList": [{"osType": o.get("type", ""), "osVersions": o.get("versions") or []}
                                    for o in _json(r["operating_systems"], [])]}
    elif kind == "DOMAIN":
        out["domains"] = {"domains": _json(r["domains"], [])}
    elif kind == "PROCESS":
        p = _json(r["process"], {})
        out["process"] = {"osType": p.get("osType", ""), "path": p.get("path", ""), "hashes": p.get("hashes") or [],
                          "fingerprints": [p["signerFingerprint"]] if p.get("signerFingerprint") else []}
    elif kind == "PROCESS_MULTI":
        out["processMulti"] = {"semantic": r["semantic"] or "", "processes": [
            {"osType": p.get("osType", ""), "path": p.get("path", ""), "hashes": p.get("hashes") or [],
             "fingerprints": p.get("signerFingerprints") or []} for p in _json(r["processes"], [])]}
    return out
