"""Circuits through real routers: the dial's checks, the terminator choice, Route and its result.

When an SDK dials a service through a real router, the router asks for a circuit
(``CreateCircuitV2``, or V1 in protobuf). The controller makes the checks the embedded router
makes before a dial (the Dial session, a certificate of its API session, the policies for this
router, the public key an encrypted service needs) and picks among the service's terminators on
online routers that a path reaches (``links.py``: that router itself, or others over
router-to-router links): instance id, precedence, then the service's strategy over path cost +
terminator cost + recent failures (``routing/strategy.py``). Every router of the path gets its
``Route`` (one router: ingress to egress and back; over links: ingress, transit, egress with
upstream's forwarding entries; the egress dials the terminator's address with the dialer's peer
data) and all must answer success. A failed ``RouteResult`` penalises the terminator (an invalid
one is deleted, as upstream does) and the next is tried, up to three attempts in the route
timeout; the answer to the router carries the ingress address and the peer data (the host's
public key) or upstream's error text and code.

A circuit ends when either end faults, when a link or a router of its path goes: it is forgotten
and ``Unroute`` goes to every router of its path, else their forwarders keep it. Circuit ids a
router confirms that the controller does not know are unrouted at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..channel.wire import H as WH
from ..channel.wire import Message
from ..events import reports
from ..routing import checks, strategy
from . import messages, pb
from .messages import C, H
from .part import Handler, Part

if TYPE_CHECKING:  # pragma: no cover
    from .channel import RouterChannel
    from .server import CtrlServer

log = logging.getLogger("ziti_lite.ctrl")

ROUTE_TIMEOUT = 10.0          # all attempts of one circuit (upstream's route timeout)
REROUTE = 99969996            # upstream's attempt number of a reroute: routers keep the circuit's ends
ATTEMPTS = 3
PUBLIC_KEY = WH.PUBLIC_KEY    # peer data key of the end-to-end encryption public key (1003)
INTERNAL = 1                  # edge error code for errors that are not the caller's


@dataclass(slots=True)
class Circuit:
    id: str
    path: list[str]            # router ids, ingress first, egress (the terminator's router) last
    links: list[str]           # link ids between them
    session_id: str
    service_id: str
    terminator_id: str
    ingress_id: str
    egress_id: str
    client_id: str             # the dialing identity
    tags: dict[str, str]
    created: float             # time.time()
    instance_id: str = ""      # the terminator's
    host_id: str = ""          # the hosting identity

    @property
    def router_id(self) -> str:
        return self.path[0]


def route_messages(cid: str, attempt: int, timeout_ns: int, path: list[str], links: list[str], ingress: str,
                   egress: str, term: dict, peer_data: dict[int, bytes], tags: dict[str, str]) -> dict[str, dict]:
    """The Route of every router of a path (upstream's forwarding entries): one router joins
    ingress and egress; over links the ingress forwards to the first link, each transit router
    from one link to the next, and the egress from the last link to the terminator. A reroute
    (``attempt`` REROUTE) keeps the egress the circuit has: no egress part."""
    def route(forwards: list[tuple[str, str, int]], egress_part: bool) -> dict:
        out: dict = {"circuitId": cid, "attempt": attempt, "timeout": timeout_ns, "context": {}, "tags": tags,
                     "forwards": [{"srcAddress": a, "dstAddress": b, "dstType": t} for a, b, t in forwards]}
        if egress_part and attempt != REROUTE:
            out["egress"] = {"binding": term["binding"], "address": egress, "destination": term["address"],
                             "peerData": peer_data}
        return out
    if not links:
        return {path[0]: route([(ingress, egress, messages.DEST_END), (egress, ingress, messages.DEST_START)], True)}
    routes = {path[0]: route([(ingress, links[0], messages.DEST_LINK), (links[0], ingress, messages.DEST_START)],
                             False)}
    for i in range(1, len(links)):
        routes[path[i]] = route([(links[i - 1], links[i], messages.DEST_LINK),
                                 (links[i], links[i - 1], messages.DEST_LINK)], False)
    routes[path[-1]] = route([(egress, links[-1], messages.DEST_LINK), (links[-1], egress, messages.DEST_END)], True)
    return routes


class Failed(Exception):
    def __init__(self, text: str, code: int = INTERNAL):
        super().__init__(text)
        self.code = code


class Circuits(Part):
    def __init__(self, server: CtrlServer):
        super().__init__(server)
        self.live: dict[str, Circuit] = {}
        self.created = 0
        self.tasks: set[asyncio.Task] = set()

    def handlers(self) -> dict[int, Handler]:
        return {C.CREATE_CIRCUIT_V2: self._create_v2, C.CREATE_CIRCUIT: self._create_v1, C.FAULT: self._fault,
                C.CIRCUIT_CONFIRMATION: self._confirmation, C.ROUTE_RESULT: self._late_result}

    def router_lost(self, router_id: str, removed: bool) -> None:
        for cid in [c.id for c in self.live.values() if router_id in c.path]:
            self.end(cid, now=True)

    def carrying(self, session_id: str) -> list[str]:
        """Routers of the live circuits of a session (``/sessions/{id}/route-path``)."""
        for c in self.live.values():
            if c.session_id == session_id:
                return list(c.path)
        return []

    # ------------------------------------------------------------------ requests
    def _create_v2(self, ch: RouterChannel, m: Message) -> None:
        try:
            req = {"sessionToken": m.text(H.CIRCUIT_SESSION_TOKEN),
                   "apiSessionToken": m.text(H.CIRCUIT_API_SESSION_TOKEN),
                   "fingerprints": messages.decode_strings(m.headers.get(H.CIRCUIT_FINGERPRINTS)),
                   "terminatorInstanceId": m.text(H.CIRCUIT_INSTANCE_ID),
                   "peerData": messages.decode_u32_map(m.headers.get(H.CIRCUIT_PEER_DATA))}
        except ValueError as e:
            log.warning("router %s: malformed CreateCircuitV2 (%s)", ch.label, e)
            return self._error(ch, m, f"malformed request: {e}", INTERNAL)
        self._spawn(ch, m, req, v2=True)

    def _create_v1(self, ch: RouterChannel, m: Message) -> None:
        self._spawn(ch, m, pb.decode(messages.CREATE_CIRCUIT, m.body), v2=False)

    def _spawn(self, ch: RouterChannel, m: Message, req: dict, v2: bool) -> None:
        task = asyncio.create_task(self._create(ch, m, req, v2))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _create(self, ch: RouterChannel, m: Message, req: dict, v2: bool) -> None:
        try:
            circuit, peer_data = await self.create(ch, req)
        except Failed as e:
            log.info("router %s: circuit refused: %s", ch.label, e)
            return self._error(ch, m, str(e), e.code)
        except Exception:
            log.exception("router %s: circuit creation", ch.label)
            return self._error(ch, m, "internal error creating the circuit", INTERNAL)
        tags = {"serviceId": circuit.service_id, "clientId": req["_identity"], "hostId": req["_host"]}
        if v2:
            ch.reply(m, C.CREATE_CIRCUIT_V2_RESPONSE, {
                H.CIRCUIT_ID: circuit.id.encode(), H.CIRCUIT_ADDRESS: circuit.ingress_id.encode(),
                H.CIRCUIT_PEER_DATA: messages.encode_u32_map(peer_data),
                H.CIRCUIT_TAGS: messages.encode_string_map(tags)})
        else:
            ch.reply(m, C.CREATE_CIRCUIT_RESPONSE, {}, pb.encode(messages.CREATE_CIRCUIT_RESPONSE, {
                "circuitId": circuit.id, "address": circuit.ingress_id, "peerData": peer_data, "tags": tags}))

    def _error(self, ch: RouterChannel, m: Message, text: str, code: int) -> None:
        ch.reply(m, C.ERROR, {H.ERROR_CODE: code.to_bytes(4, "little")}, text.encode())

    async def create(self, ch: RouterChannel, req: dict) -> tuple[Circuit, dict[int, bytes]]:
        srv = self.server
        rid = ch.router_id
        assert rid is not None
        sess, err = checks.router_session(srv.ctl, req["sessionToken"], "Dial", req["fingerprints"], rid)
        if sess is None:
            raise Failed(err, checks.ERROR_CODES.get(err, INTERNAL))
        srv.sync.used(ch, sess)
        peer_in = req["peerData"]
        if sess.encryption_required and not peer_in.get(PUBLIC_KEY):
            raise Failed(checks.ENCRYPTION_MISSING, checks.ERROR_CODES[checks.ENCRYPTION_MISSING])
        req["_identity"] = sess.identity_id
        instance = req["terminatorInstanceId"]
        terms = self._candidates(rid, sess, instance)
        if not terms:
            suffix = f" for instanceId {instance}" if instance else ""
            reports.circuit_failed(srv.ctl.events, uuid.uuid4().hex, session_id=sess.id, service_id=sess.service_id,
                                  router_id=rid, client_identity_id=sess.identity_id, cause="NO_TERMINATORS",
                                  creation_seconds=0.0)
            raise Failed(f"service {sess.service_id} has no terminators{suffix}")
        cid = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + ROUTE_TIMEOUT
        failures = srv.terminators.failures
        reason = f"service {sess.service_id} has no terminators that accepted the dial"
        cause = "ROUTER_ERR_GENERIC"   # upstream's circuit failure causes (events)
        for attempt, (term, path, links) in enumerate(terms[:ATTEMPTS]):
            left = deadline - loop.time()
            if left <= 0.05 or ch.closed:
                break
            ingress, egress = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
            tags = {"serviceId": sess.service_id, "clientId": sess.identity_id, "hostId": term["host_id"]}
            routes = route_messages(cid, attempt, int(left * 1e9), path, links, ingress, egress, term, peer_in, tags)
            try:
                results = await self._route(routes, left)
            except ConnectionError:
                self._unroute_path(path, cid, now=True)
                reason, cause = "a router of the path disconnected while routing the circuit", "PATH_MISSING_LINK"
                continue
            failed = next(((rid, r) for rid, r in results.items() if r is None
                           or messages.H.ROUTE_SUCCESS not in r.headers), None)
            if failed is None:
                failures[term["id"]] = strategy.penalised(failures.get(term["id"], 0), "success")
                peer_out = dict(srv.terminators.peer_data.get(term["id"], {}))
                peer_out.update({k: v for k, v in results[path[-1]].headers.items()   # type: ignore[union-attr]
                                 if k >= 1000 and not 1101 <= k <= 1104})
                if sess.encryption_required and not peer_out.get(PUBLIC_KEY):
                    self._unroute_path(path, cid, now=True)
                    raise Failed("encryption required on service, terminator did not send public header",
                                 checks.ERROR_CODES[checks.ENCRYPTION_MISSING])
                circuit = Circuit(cid, path, links, sess.id, sess.service_id, term["id"], ingress, egress,
                                  sess.identity_id, tags, time.time(), term["instance_id"], term["host_id"])
                self.live[cid] = circuit
                self.created += 1
                reports.circuit_created(srv.ctl.events, cid, **self._facts(circuit), cost=term["cost"],
                                       creation_seconds=loop.time() - started, ingress_id=ingress, egress_id=egress)
                req["_host"] = term["host_id"]
                return circuit, peer_out
            where, result = failed
            self._unroute_path(path, cid, now=True)
            if result is None:
                failures[term["id"]] = strategy.penalised(failures.get(term["id"], 0), "timeout")
                reason, cause = f"timeout creating routes for [s/{cid}] on [r/{where}]", "ROUTER_ERR_DIAL_TIMED_OUT"
                continue
            code = result.headers.get(H.ROUTE_ERROR_CODE, b"\x00")[:1]
            text = result.text(H.ROUTE_ERROR) or "route failed"
            reason = f"error creating route for [s/{cid}] on [r/{where}] ({text})"
            if (where == path[-1] and code == bytes([messages.ROUTE_ERR_INVALID_TERMINATOR])
                    and term["binding"] in ("edge", "tunnel")):
                srv.terminators.remove(path[-1], [term["id"]])
            else:
                failures[term["id"]] = strategy.penalised(failures.get(term["id"], 0), "error")
        reports.circuit_failed(srv.ctl.events, cid, session_id=sess.id, service_id=sess.service_id, router_id=rid,
                              client_identity_id=sess.identity_id, cause=cause, creation_seconds=loop.time() - started)
        raise Failed(f"exceeded maximum [{ATTEMPTS}] retries creating circuit [c/{cid}]: {reason}")

    async def _route(self, routes: dict[str, dict], timeout: float) -> dict[str, Message | None]:
        """Send each router of the path its Route at once; each one's RouteResult (None: none in
        time). ConnectionError when a router of the path is not connected."""
        futures = {}
        for rid, route in routes.items():
            ch = self.server.routers.get(rid)
            if ch is None or ch.closed:
                raise ConnectionError(rid)
            futures[rid] = ch.request(C.ROUTE, {}, pb.encode(messages.ROUTE, route), timeout)
        out: dict[str, Message | None] = {}
        for rid, fut in futures.items():
            try:
                out[rid] = await fut
            except TimeoutError:
                out[rid] = None
            except ConnectionError:
                raise
        return out

    def _candidates(self, router_id: str, sess: checks.Session, instance: str) -> list[tuple[dict, list, list]]:
        """The service's terminators on online routers a path reaches from ``router_id``, best
        first: precedence, then the strategy over path cost + terminator cost + failures."""
        srv = self.server
        online = [rid for rid, c in srv.routers.items() if c.ready]
        rows = srv.ctl.store.all(
            "SELECT id, router_id, binding, address, instance_id, cost, precedence, host_id FROM terminators"
            " WHERE service_id = ? AND router_id IN (SELECT value FROM json_each(?))",
            (sess.service_id, json.dumps(online)))
        if instance:
            rows = [r for r in rows if r["instance_id"] == instance]
        paths: dict[str, tuple[int, list[str], list[str]] | None] = {}
        reachable = []
        for r in rows:
            if r["router_id"] not in paths:
                paths[r["router_id"]] = srv.links.path(router_id, r["router_id"])
            found = paths[r["router_id"]]
            if found is not None:
                reachable.append((r, found))
        failures = srv.terminators.failures
        ordered = strategy.order(reachable, sess.terminator_strategy, lambda x: x[0]["precedence"],
                                 lambda x: x[1][0] + x[0]["cost"] + failures.get(x[0]["id"], 0))
        return [(r, path, links) for r, (_, path, links) in ordered]

    # ------------------------------------------------------------------ ends
    def _unroute(self, ch: RouterChannel, cid: str, now: bool) -> None:
        ch.send(C.UNROUTE, {}, pb.encode(messages.UNROUTE, {"circuitId": cid, "now": now}))

    def _unroute_path(self, path: list[str], cid: str, now: bool) -> None:
        for rid in path:
            ch = self.server.routers.get(rid)
            if ch is not None:
                self._unroute(ch, cid, now)

    def end(self, cid: str, now: bool = False) -> None:
        """Forget a circuit and unroute it on every router of its path (``now``: without waiting
        for what is in flight, for a circuit whose path broke)."""
        circuit = self.live.pop(cid, None)
        if circuit is not None:
            self._unroute_path(circuit.path, cid, now=now)
            reports.circuit_deleted(self.server.ctl.events, cid, **self._facts(circuit),
                                   duration_seconds=time.time() - circuit.created)

    @staticmethod
    def _facts(c: Circuit) -> dict:
        return {"session_id": c.session_id, "service_id": c.service_id, "terminator_id": c.terminator_id,
                "instance_id": c.instance_id, "router_id": c.router_id, "client_identity_id": c.client_id,
                "host_identity_id": c.host_id, "path": c.path, "links": c.links}

    def _fault(self, ch: RouterChannel, m: Message) -> None:
        fault = pb.decode(messages.FAULT, m.body)
        subject = fault["subject"]
        if subject == messages.FAULT_LINK:
            self.server.links.fault(ch, fault["id"])
            return
        if subject in (messages.FAULT_INGRESS, messages.FAULT_EGRESS):
            ids = [fault["id"]]
        elif subject in (messages.FAULT_FORWARD, messages.FAULT_UNKNOWN_OWNER_FORWARD):
            ids = fault["id"].split()
        else:
            return
        for cid in ids:
            if cid in self.live:
                log.debug("router %s: circuit %s ended", ch.label, cid)
                self.end(cid)
            elif cid:
                self._unroute(ch, cid, now=True)

    def link_lost(self, link) -> None:
        """Circuits over a link that went are rerouted, as upstream does, when another path joins
        their ingress and egress routers (each router of the new path gets its Route, the ends
        kept); the others end on every router left of their path."""
        for c in [c for c in self.live.values() if link.id in c.links]:
            found = self.server.links.path(c.path[0], c.path[-1])
            if found is None:
                self.end(c.id, now=True)
                continue
            _, path, links = found
            c.path, c.links = path, links
            term = {"binding": "", "address": ""}
            for rid, route in route_messages(c.id, REROUTE, int(ROUTE_TIMEOUT * 1e9), path, links, c.ingress_id,
                                             c.egress_id, term, {}, c.tags).items():
                ch = self.server.routers.get(rid)
                if ch is not None:
                    ch.send(C.ROUTE, {}, pb.encode(messages.ROUTE, route))
            log.info("circuit %s rerouted: %s", c.id, " -> ".join(path))

    def _confirmation(self, ch: RouterChannel, m: Message) -> None:
        for cid in pb.decode(messages.CIRCUIT_CONFIRMATION, m.body)["circuitIds"]:
            if cid not in self.live:
                self._unroute(ch, cid, now=True)

    def _late_result(self, ch: RouterChannel, m: Message) -> None:
        """A RouteResult after its attempt was given up: if it succeeded, undo it."""
        cid = m.body.decode("utf-8", "replace")
        if messages.H.ROUTE_SUCCESS in m.headers and cid and cid not in self.live:
            self._unroute(ch, cid, now=True)
