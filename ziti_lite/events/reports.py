"""What a router reports, one call per fact: the seam between routers and the event stream.
(Upstream calls these fabric events; the module is not named ``fabric`` so that it is not
mistaken for the ``fabric/`` package, the fabric management API.)

The embedded router (``edge/router.py``) calls these, and so can any other code that learns of
a router, an SDK or a circuit (a router control channel): each takes the controller's ``Bus``
and plain values, builds the upstream event and publishes it (nothing is built when nobody
listens). Terminators need no call: their events come from their rows (``tables.py``), whoever
writes them.
"""

from __future__ import annotations

from . import shapes
from .bus import Bus


def router_online(bus: Bus, router_id: str, online: bool) -> None:
    """A router connected (``online``) or went away."""
    if bus.active:
        bus.emit(shapes.router(bus.source_id, router_id, online))


def sdk_online(bus: Bus, identity_id: str, online: bool) -> None:
    """An identity's first SDK channel opened (``online``), or its last one closed."""
    if bus.active:
        bus.emit(shapes.sdk(bus.source_id, identity_id, online))


def circuit_created(bus: Bus, circuit_id: str, *, session_id: str, service_id: str, terminator_id: str,
                    instance_id: str, router_id: str, client_identity_id: str, host_identity_id: str,
                    cost: int, creation_seconds: float, ingress_id: str = "", egress_id: str = "",
                    path: list[str] | None = None, links: list[str] | None = None) -> None:
    """A dial reached its host: the circuit carries data from now on (over ``path``, its routers
    from ingress to egress, and the ``links`` between them, where it crosses routers)."""
    if bus.active:
        bus.emit(shapes.circuit(
            bus.source_id, "created", circuit_id, session_id, service_id, terminator_id, instance_id, router_id,
            _tags(client_identity_id, host_identity_id, service_id), ingress_id=ingress_id, egress_id=egress_id,
            creation_seconds=creation_seconds, cost=cost, nodes=path, links=links))


def circuit_deleted(bus: Bus, circuit_id: str, *, session_id: str, service_id: str, terminator_id: str,
                    instance_id: str, router_id: str, client_identity_id: str, host_identity_id: str,
                    duration_seconds: float, path: list[str] | None = None, links: list[str] | None = None) -> None:
    """A circuit ended (either end closed, or it was revoked)."""
    if bus.active:
        bus.emit(shapes.circuit(
            bus.source_id, "deleted", circuit_id, session_id, service_id, terminator_id, instance_id, router_id,
            _tags(client_identity_id, host_identity_id, service_id), duration_seconds=duration_seconds,
            nodes=path, links=links))


def circuit_failed(bus: Bus, circuit_id: str, *, session_id: str, service_id: str, router_id: str,
                   client_identity_id: str, cause: str, creation_seconds: float, terminator_id: str = "",
                   instance_id: str = "", host_identity_id: str = "") -> None:
    """A dial found no terminator that accepted it; ``cause`` is one of upstream's failure
    causes (``NO_TERMINATORS``, ``ROUTER_ERR_DIAL_TIMED_OUT``, ...)."""
    if bus.active:
        bus.emit(shapes.circuit(
            bus.source_id, "failed", circuit_id, session_id, service_id, terminator_id, instance_id, router_id,
            _tags(client_identity_id, host_identity_id, service_id), creation_seconds=creation_seconds,
            failure_cause=cause))


def _tags(client: str, host: str, service: str) -> dict[str, str]:
    """Upstream's edge circuit tags: the dialing identity, the hosting one, the service."""
    tags = {"clientId": client, "serviceId": service}
    if host:
        tags["hostId"] = host
    return tags
