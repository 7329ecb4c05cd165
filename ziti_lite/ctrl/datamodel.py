"""The router data model: the state a v2.0 router authorises bind and dial with, and its changes.

A v2.0 router subscribes (``SubscribeToDataModelRequest``) as soon as its hello is answered and
verifies every service token and OIDC access token against the public keys of this model, and
the OIDC sessions' policies against its identities, services, posture checks and service
policies. So the controller keeps one model for all routers, declared kind by kind in
``rdm.py`` (config types, configs, identities, services, posture checks, service policies with
their identity, service and posture-check links, public keys, revocations).

The model is read once, when the first router subscribes, in chunks with the event loop free
between them (the API keeps answering meanwhile). From then on the writes tell it what they
changed: the triggers of ``rdm.py`` mark each entity, link and ended API session a write
touches, and each tick (0.2 s) re-reads only the marked rows. What differs from the model
becomes one change set with the next index, sent to every subscriber; a write that rolled back
marked rows that are as they were, which makes no event. A subscriber gets the full state
(``DataState``: the model's entries joined, built once per index and shared by every router
that asks for it at that index), or, when it names our timeline and an index we still hold the
change sets after, just those.

Every ``CHECK_SECONDS`` the model is compared with a full reading of the database (in chunks,
off the request path): what differs is marked, so that a change the triggers could not see (a
write by another process) reaches the routers at the next tick; ``differences`` counts them.

Revocations: an API session that ends (logout, deletion, expiry) is revoked for as long as an
access token naming it may live, an identity disabled or deleted is revoked as of now, and the
revocation list (``revocations``: OpenZiti 2.0's entity, token ids, API sessions and
identities) is sent with each entry's type, an identity's with its cut-off. Facts:
``shared/reference/behaviour/ctrl-channel-v2.md`` §4.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import clock
from ..auth import certs as certauth
from ..channel.wire import Message
from ..pki import ca as pki
from . import messages, pb, rdm
from .messages import C, H
from .part import Handler, Part

# the kinds and the event encoders, named here too (the tests build readings with them)
from .rdm import (  # noqa: F401
    CONFIG,
    CONFIG_TYPE,
    IDENTITY,
    POLICY,
    POSTURE_CHECK,
    PUBLIC_KEY,
    REVOCATION,
    SERVICE,
    event,
    link_event,
)

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

HISTORY = 256            # change sets kept for subscribers that catch up from their index
HISTORY_BYTES = 16 << 20  # and at most this much of them (a policy of every identity lists them all)
LOAD_CHUNK = 200         # rows per query of a full reading
SLICE = 0.004            # the longest a full reading holds the loop before letting requests run
CHECK_SECONDS = 600.0    # between two consistency checks against a full reading

Key = tuple[int, str]
Links = dict[str, dict[int, frozenset[str]]]     # policy id -> related type -> entity ids


@dataclass
class Reading:
    """Entities' encoded models (by kind and id) and policies' links: a change's before or after."""
    models: dict[Key, bytes] = field(default_factory=dict)
    links: Links = field(default_factory=dict)


def _has(ids: list[str], eid: str) -> bool:
    i = bisect.bisect_left(ids, eid)
    return i < len(ids) and ids[i] == eid


class DataModel(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self.timeline = os.urandom(8).hex()
        self.index = 0
        self.history: deque[tuple[int, bytes]] = deque(maxlen=HISTORY)   # (index, encoded ChangeSet)
        self.subscribers: dict[RouterChannel, str] = {}                  # channel -> subscription id
        self.waiting: list[tuple[RouterChannel, dict]] = []              # subscribed while the model loads
        self.revoked: dict[str, tuple[str, float, float]] = {}           # id -> (type, expires, issued before)
        self.keys: dict[str, bytes] = {}                                 # kid -> certificate DER
        self._signing_kids: set[str] = set()                             # kids of server certificates
        self.models: list[dict[str, bytes]] = [{} for _ in range(8)]     # kind -> id -> rdm.entry
        self.links: dict[str, dict[int, list[str]]] = {}                 # policy -> related -> sorted ids
        self._link_entries: dict[tuple[str, int], bytes] = {}            # full-state entries of links
        self.disabled: set[str] = set()                                  # identities disabled in the model
        self.until: dict[str, str] = {}                                  # identity -> disabled_until
        self.dirty: dict[int, set[str]] = {k.order: set() for k in rdm.KINDS}
        self.dirty_links: dict[int, set[tuple[str, str]]] = {link.related: set() for link in rdm.LINKS}
        self.ended: set[str] = set()                                     # API sessions deleted
        self.state = "idle"                                              # idle, loading, ready
        self.loop: asyncio.AbstractEventLoop | None = None
        self._full: tuple[int, bytes] | None = None
        self._keys_seen: tuple | None = None
        self._timed_at = 0.0
        self._checked_at = 0.0
        self._marks: list[Callable[[str, str | None], None]] = []
        self._touched: set[Key] | None = None          # what ticks changed while a check reads
        self.changes_sent = 0
        self._history_bytes = 0
        self.differences = 0

    def handlers(self) -> dict[int, Handler]:
        return {C.SUBSCRIBE_TO_DATA_MODEL: self._subscribe}

    # ------------------------------------------------------------------ marks from the writes
    def _install(self) -> None:
        """``zl_rdm`` and the temporary triggers that call it, on the controller's connection."""
        marks: list[tuple[rdm.Mark, str]] = []
        for kind in rdm.SQL_KINDS:
            for mark in kind.marks:
                marks.append((mark, ""))
                self._marks.append(functools.partial(self._mark_entity, kind.order))
        for link in rdm.LINKS:
            marks.append((rdm.Mark(link.table, "policy_id", ("INSERT", "DELETE")), link.column))
            self._marks.append(functools.partial(self._mark_link, link.related))
        marks.append((rdm.ENDED_SESSIONS, ""))
        self._marks.append(self._mark_ended)
        store = self.server.ctl.store
        store.conn.create_scalar_function("zl_rdm", self._row, 3)  # type: ignore[arg-type]
        create, _ = rdm.triggers(marks)
        with store.write():
            store.conn.execute(create)

    def _row(self, n: int, key: str, second: str | None) -> None:
        """``zl_rdm(n, key, second)``: a row of the ``n``-th mark changed (inside the write, on the
        thread that writes the controller's connection: the loop's, while serving)."""
        try:
            self._marks[n](key, second)
        except Exception:   # the write goes on; the next consistency check finds what was missed
            log.exception("router data model: a row's mark")

    def _mark_entity(self, kind: int, key: str, _: str | None) -> None:
        self.dirty[kind].add(key)

    def _mark_link(self, related: int, policy_id: str, entity_id: str | None) -> None:
        self.dirty_links[related].add((policy_id, entity_id or ""))

    def _mark_ended(self, key: str, _: str | None) -> None:
        self.ended.add(key)

    # ------------------------------------------------------------------ the first reading
    def start(self) -> None:
        """Read the model (once): in a task on the loop, chunk by chunk."""
        if self.state != "idle":
            return
        self.state = "loading"
        self.loop = asyncio.get_running_loop()
        if not self._marks:            # once (a reading that failed is tried again, the triggers stay)
            self._install()
        self.loop.create_task(self._load())

    async def _load(self) -> None:
        t0 = time.monotonic()
        try:
            models: list[dict[str, bytes]] = [{} for _ in range(8)]
            links: dict[str, dict[int, list[str]]] = {}
            snap = rdm.Snapshot(self.server.ctl.store)
            try:
                for kind in rdm.SQL_KINDS:
                    async for rid, model, row in self._chunks(snap, kind):
                        models[kind.order][rid] = rdm.entry(kind.order, model)
                        self._note(kind.order, rid, row)
                for link in rdm.LINKS:
                    async for pid, eid in self._link_chunks(snap, link):     # in key order: each list sorted
                        links.setdefault(pid, {}).setdefault(link.related, []).append(eid)
            finally:
                snap.close()
            self.models, self.links = models, links
            self._advance(emit=False)
            await self._encode_links()
        except Exception:
            log.exception("router data model: reading the database")
            self.state = "idle"
            return
        self.state = "ready"
        self._checked_at = time.monotonic()
        log.info("router data model read in %.2f s (%d entities)", time.monotonic() - t0,
                 sum(len(m) for m in self.models))
        waiting, self.waiting = self.waiting, []
        for ch, req in waiting:
            if not ch.closed:
                self._answer(ch, req)

    async def _encode_links(self) -> None:
        """Every policy's link entries, made now (not while a router waits), a slice of ids a step."""
        for pid, rels in list(self.links.items()):
            for related, ids in rels.items():
                parts = []
                for i in range(0, len(ids), LOAD_CHUNK * 10):
                    parts.append(rdm.id_list(ids[i:i + LOAD_CHUNK * 10]))
                    await asyncio.sleep(0)
                if ids:
                    self._link_entries[(pid, related)] = rdm.link_entry(pid, related, ids, b"".join(parts))

    async def _chunks(self, snap: rdm.Snapshot, kind: rdm.Kind):
        """(id, model, row) of every entity of ``kind``, the loop let go every ``SLICE`` seconds."""
        after = ""
        since = time.perf_counter()
        while True:
            while snap.writing:        # never read another write's rows before they commit
                await asyncio.sleep(0.005)
            rows = rdm.chunk_rows(snap, kind, after, LOAD_CHUNK)
            for row in rows:
                yield (*rdm.encode(kind, row), row)
                if time.perf_counter() - since > SLICE:
                    await asyncio.sleep(0)
                    since = time.perf_counter()
            if len(rows) < LOAD_CHUNK:
                return
            after = rows[-1]["id"]

    async def _link_chunks(self, snap: rdm.Snapshot, link: rdm.LinkTable):
        after = ("", "")
        while True:
            while snap.writing:
                await asyncio.sleep(0.005)
            rows = rdm.read_links_chunk(snap, link, after, LOAD_CHUNK * 10)
            for pid, eid in rows:
                yield sys.intern(pid), sys.intern(eid)
            if len(rows) < LOAD_CHUNK * 10:
                return
            after = rows[-1]
            await asyncio.sleep(0)

    def _note(self, kind: int, rid: str, row: dict) -> None:
        """What the model keeps of an identity beside its entry: disabled, and until when."""
        if kind != IDENTITY:
            return
        if rdm.disabled(row):
            self.disabled.add(rid)
            if row["disabled_until"]:
                self.until[rid] = row["disabled_until"]
        else:
            self.disabled.discard(rid)
            self.until.pop(rid, None)

    # ------------------------------------------------------------------ changes
    def tick(self) -> None:
        """Send what the writes since the last tick changed (and what time changed: a disable
        that ended, a revocation that expired) to every subscriber."""
        if self.state != "ready" or self.server.ctl.store.writing:
            return
        self._advance(emit=True)
        if time.monotonic() - self._checked_at > CHECK_SECONDS and self.loop is not None:
            self._checked_at = time.monotonic()
            self.loop.create_task(self.check())

    def _advance(self, emit: bool) -> None:
        self._timed()
        before, after = self._collect()
        if not before.models and not after.models:
            return
        changes = diff(before, after)
        self._apply(before, after)
        if not changes or not emit:
            return
        self.index += 1
        self._full = None
        body = pb.encode(messages.CHANGE_SET, {"index": self.index, "changes": changes,
                                               "previousIndex": self.index - 1})
        self.history.append((self.index, body))
        self._history_bytes = sum(len(b) for _, b in self.history)
        while self._history_bytes > HISTORY_BYTES and len(self.history) > 1:
            self._history_bytes -= len(self.history.popleft()[1])
        for ch, sub in list(self.subscribers.items()):
            self._send(ch, C.DATA_STATE_CHANGE_SET, sub, body)
        self.changes_sent += 1

    def _timed(self) -> None:
        """Once a second: identities whose disable ended and revocations that expired are marked."""
        mono = time.monotonic()
        if mono - self._timed_at < 1.0:
            return
        self._timed_at = mono
        stamp = clock.stamp()
        for iid in [i for i, until in self.until.items() if until <= stamp]:
            self.dirty[IDENTITY].add(iid)
        now = time.time()
        for rid in [r for r, v in self.revoked.items() if v[1] <= now]:
            del self.revoked[rid]
            self.dirty[REVOCATION].add(rid)

    def _collect(self) -> tuple[Reading, Reading]:
        """The marked entities as the model has them and as the database has them now."""
        store = self.server.ctl.store
        dirty, self.dirty = self.dirty, {k.order: set() for k in rdm.KINDS}
        before, after = Reading(), Reading()
        was_disabled: set[str] = set()
        for kind in rdm.SQL_KINDS:
            ids = dirty[kind.order]
            if kind.order == IDENTITY:
                was_disabled = ids & self.disabled
            elif kind.order == REVOCATION:
                ids |= self._revocations(dirty[IDENTITY], was_disabled, after)
            if not ids:
                continue
            have = self.models[kind.order]
            for rid in ids:
                if rid in have:
                    before.models[(kind.order, rid)] = rdm.model_of(have[rid])
            for rid, (model, row) in rdm.read(store, kind, ids).items():
                after.models[(kind.order, rid)] = model
                self._note(kind.order, rid, row)
            if kind.order == REVOCATION:
                self._own_revocations(ids, after)
        self._public_keys_changed(before, after)
        self._collect_links(before, after)
        return before, after

    def _revocations(self, identities: set[str], was_disabled: set[str], after: Reading) -> set[str]:
        """Revocations the marks make: API sessions that ended, identities disabled or deleted."""
        now = time.time()
        life = self.server.ctl.settings.oidc_access_seconds
        out: set[str] = set()
        ended, self.ended = self.ended, set()
        for sid in ended:
            self.revoked[sid] = ("API_SESSION", now + life, 0.0)
            out.add(sid)
        for iid in identities:
            gone = (IDENTITY, iid) not in after.models and iid in self.models[IDENTITY]
            if gone:
                self.disabled.discard(iid)
                self.until.pop(iid, None)
            if gone or (iid in self.disabled and iid not in was_disabled):
                self.revoked[iid] = ("IDENTITY", now + life, now)
                out.add(iid)
        return out

    def _own_revocations(self, ids: set[str], after: Reading) -> None:
        for rid in ids:
            if (REVOCATION, rid) in after.models:
                continue
            own = self.revoked.get(rid)
            if own is not None:
                kind, expires, issued = own
                after.models[(REVOCATION, rid)] = pb.encode(messages.RDM_REVOCATION, {
                    "id": rid, "expiresAt": rdm.stamp(expires), "type": kind,
                    "issuedBefore": rdm.stamp(issued) if issued else None})

    def _public_keys_changed(self, before: Reading, after: Reading) -> None:
        state = self.server.ctl.state
        seen = tuple(state.get(k) for k in ("server_cert", "server_cert_previous", "root_cert", "signer_cert",
                                            "signer_cert_previous"))
        if seen == self._keys_seen:
            return
        self._keys_seen = seen
        for kid, data in self.models[PUBLIC_KEY].items():
            before.models[(PUBLIC_KEY, kid)] = rdm.model_of(data)
        for kid, der in self._public_keys().items():
            usages = [messages.RDM_KEY_JWT, messages.RDM_KEY_CLIENT_CERT] if kid in self._signing_kids \
                else [messages.RDM_KEY_CLIENT_CERT]
            after.models[(PUBLIC_KEY, kid)] = pb.encode(messages.RDM_PUBLIC_KEY, {
                "data": der, "kid": kid, "usages": usages, "format": messages.RDM_KEY_FORMAT_X509_DER})

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

    def _collect_links(self, before: Reading, after: Reading) -> None:
        """The marked links, as the model and the database have them, per policy; a policy that
        went takes all its links along (``diff`` removes them before it)."""
        store = self.server.ctl.store
        dirty, self.dirty_links = self.dirty_links, {link.related: set() for link in rdm.LINKS}
        had: dict[str, dict[int, set[str]]] = {}
        has: dict[str, dict[int, set[str]]] = {}
        for link in rdm.LINKS:
            pairs = dirty[link.related]
            if not pairs:
                continue
            present = rdm.links_present(store, link, sorted(pairs))
            for pid, eid in pairs:
                was = _has(self.links.get(pid, {}).get(link.related, []), eid)
                now = (pid, eid) in present
                if was != now:
                    had.setdefault(pid, {}).setdefault(link.related, set())
                    has.setdefault(pid, {}).setdefault(link.related, set())
                    (had if was else has)[pid][link.related].add(eid)
        policies = self.models[POLICY]
        for pid in set(had) | {k[1] for k in before.models if k[0] == POLICY} | \
                {k[1] for k in after.models if k[0] == POLICY}:
            key = (POLICY, pid)
            if key in before.models and key not in after.models:        # the policy went
                before.links[pid] = {r: frozenset(ids) for r, ids in self.links.get(pid, {}).items()}
                continue
            if pid not in had:
                continue
            if key not in after.models and pid in policies:             # unchanged policy, links changed
                before.models[key] = after.models[key] = rdm.model_of(policies[pid])
            if key in after.models:
                before.links[pid] = {r: frozenset(ids) for r, ids in had[pid].items()}
                after.links[pid] = {r: frozenset(ids) for r, ids in has[pid].items()}

    def _apply(self, before: Reading, after: Reading) -> None:
        """The model becomes ``after`` where the two readings cover it."""
        if self._touched is not None:
            self._touched.update(before.models, after.models)
        for kind, rid in before.models.keys() - after.models.keys():
            self.models[kind].pop(rid, None)
            if kind == POLICY:
                for related in self.links.pop(rid, {}):
                    self._link_entries.pop((rid, related), None)
        for (kind, rid), model in after.models.items():
            if before.models.get((kind, rid)) != model:
                self.models[kind][rid] = rdm.entry(kind, model)
        for pid, new in after.links.items():
            old = before.links.get(pid, {})
            kept = self.links.setdefault(pid, {})
            for related in {*old, *new}:
                ids = kept.setdefault(related, [])
                for eid in old.get(related, frozenset()):
                    i = bisect.bisect_left(ids, eid)
                    if i < len(ids) and ids[i] == eid:
                        del ids[i]
                for eid in new.get(related, frozenset()):
                    i = bisect.bisect_left(ids, eid)
                    if i == len(ids) or ids[i] != eid:
                        ids.insert(i, sys.intern(eid))
                self._link_entries.pop((pid, related), None)

    def _send(self, ch: RouterChannel, content: int, subscription: str, body: bytes) -> None:
        if ch.closed:
            self.subscribers.pop(ch, None)
            return
        headers = {H.RDM_SUBSCRIPTION_ID: subscription.encode()} if subscription else {}
        if content == C.DATA_STATE:
            ch.send_large(content, headers, body)   # the shared body, written as the router reads
        else:
            ch.send(content, headers, body)

    def full_state(self) -> bytes:
        """The whole model as one ``DataState`` (its ``endIndex`` is the current index): the
        entries joined, once per index."""
        if self._full is not None and self._full[0] == self.index:
            return self._full[1]
        parts: list[bytes] = []
        for kind in range(8):
            parts += self.models[kind].values()
            if kind == POLICY:
                parts += self._all_link_entries()
        parts.append(rdm.state_tail(self.index, self.timeline))
        body = b"".join(parts)
        self._full = (self.index, body)
        return body

    def _all_link_entries(self) -> Iterator[bytes]:
        """Each policy's links, one entry per related type (encoded once until they change)."""
        for pid, rels in list(self.links.items()):
            for related, ids in sorted(rels.items()):
                if not ids:
                    continue
                entry = self._link_entries.get((pid, related))
                if entry is None:
                    entry = self._link_entries[(pid, related)] = rdm.link_entry(pid, related, ids)
                yield entry

    # ------------------------------------------------------------------ consistency
    async def check(self) -> int:
        """Compare the model with a full reading (chunk by chunk, the loop free between) and mark
        what differs, so that the next tick re-reads and sends it. Returns how many entities and
        links differed (0 when every change came through the triggers); what a tick changed
        meanwhile is left out (the reading may predate it)."""
        if self.state != "ready":
            return 0
        self._advance(emit=True)
        self._touched = set()
        snap = rdm.Snapshot(self.server.ctl.store)
        try:
            found = 0
            for kind in rdm.SQL_KINDS:
                found += await self._check_kind(snap, kind)
            for link in rdm.LINKS:
                found += await self._check_links(snap, link)
        finally:
            snap.close()
            self._touched = None
        self.differences += found
        if found:
            log.warning("router data model: %d difference(s) with the database (a write elsewhere?); sending them",
                        found)
        return found

    async def _check_kind(self, snap: rdm.Snapshot, kind: rdm.Kind) -> int:
        found, seen, have, dirty = 0, set(), self.models[kind.order], self.dirty[kind.order]
        touched = self._touched if self._touched is not None else set()
        async for rid, model, _ in self._chunks(snap, kind):
            seen.add(rid)
            if have.get(rid) != rdm.entry(kind.order, model) and rid not in dirty and \
                    (kind.order, rid) not in touched:
                found += 1
                dirty.add(rid)
        for rid in set(have) - seen:
            if (kind.order == REVOCATION and rid in self.revoked) or rid in dirty or (kind.order, rid) in touched:
                continue
            found += 1
            dirty.add(rid)
        return found

    async def _check_links(self, snap: rdm.Snapshot, link: rdm.LinkTable) -> int:
        """The links of each policy, in key order, against the model's sorted lists."""
        odd: set[tuple[str, str]] = set()
        current: str | None = None
        ids: list[str] = []
        seen: set[str] = set()

        def compare(pid: str | None, ids: list[str]) -> None:
            if pid is None:
                return
            seen.add(pid)
            kept = self.links.get(pid, {}).get(link.related, [])
            if kept != ids:
                odd.update((pid, e) for e in set(kept) ^ set(ids))
        async for pid, eid in self._link_chunks(snap, link):
            if pid != current:
                compare(current, ids)
                current, ids = pid, []
            ids.append(eid)
        compare(current, ids)
        for pid, rels in self.links.items():
            if pid not in seen:
                odd.update((pid, e) for e in rels.get(link.related, ()))
        touched = self._touched if self._touched is not None else set()
        odd = {p for p in odd if (POLICY, p[0]) not in touched} - self.dirty_links[link.related]
        self.dirty_links[link.related] |= odd
        return len(odd)

    # ------------------------------------------------------------------ subscriptions
    def _subscribe(self, ch: RouterChannel, m: Message) -> None:
        req = pb.decode(messages.SUBSCRIBE_TO_DATA_MODEL, m.body)
        if self.state != "ready":
            self.waiting = [(c, r) for c, r in self.waiting if c is not ch] + [(ch, req)]
            self.start()
            return
        self._answer(ch, req)

    def _answer(self, ch: RouterChannel, req: dict) -> None:
        sub = req["subscriptionId"]
        known = self.subscribers.get(ch)
        self.tick()                     # what is marked first: a new subscriber starts after it
        self.subscribers[ch] = sub
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
                 sum(len(m) for m in self.models))

    def channel_lost(self, ch: RouterChannel) -> None:
        self.subscribers.pop(ch, None)
        self.waiting = [(c, r) for c, r in self.waiting if c is not ch]


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
    for link in rdm.LINKS:
        related = link.related
        was, now = old.get(related, frozenset()), new.get(related, frozenset())
        if now - was:
            out.append(link_event(policy_id, related, now - was, True))
        if was - now:
            out.append(link_event(policy_id, related, was - now, False))
    return out
