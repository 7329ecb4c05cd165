"""Each event type as upstream v1.3.3 writes it (``controller/event``), field for field, plus
``authentication`` in the shape upstream added after 1.3. Builders take plain values and return
dicts; the bus encodes them. Where ziti-lite differs it is on purpose and in the README: tokens
are given as the id of their session, never the token itself, and entity states are the
entity's API detail with every secret-bearing field redacted (``redact``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from .. import clock

REDACTED = "[redacted]"
# detail and body fields that carry a secret, compared without case: session and enrollment
# tokens, one-time JWTs, passwords, private keys, TOTP secrets and codes, terminator secrets
SECRET_FIELDS = frozenset({
    "token", "jwt", "password", "newpassword", "currentpassword", "privatekey", "key", "secret",
    "clientsecret", "instancesecret", "enrollmentjwt", "enrollmenttoken", "recoverycodes", "code",
    "provisioningurl", "sessiontoken", "passwordhash", "salt", "csr", "cakey",
})


# matched against the lower-cased text: a case-insensitive pattern scans ~5 times slower
_SECRET_KEY = re.compile(b'"(?:' + b"|".join(sorted(n.encode() for n in SECRET_FIELDS)) + b')"')


def may_hold_secrets(encoded: bytes) -> bool:
    """Whether JSON text has a key that ``redact`` would replace (one scan of the text: most
    entity details have none, and walking them costs more than encoding them)."""
    return _SECRET_KEY.search(encoded.lower()) is not None


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with the value of every secret field replaced."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and k.lower() in SECRET_FIELDS and v is not None else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def timestamp(t: dt.datetime | None = None) -> str:
    """Go's ``time.Time`` in JSON (RFC 3339 with the fraction's trailing zeros dropped), in UTC."""
    if t is None:
        t = clock.now()   # already UTC
    elif t.utcoffset():
        t = t.astimezone(dt.UTC)
    text = t.isoformat()   # C-fast; ".ffffff" only when there is a fraction
    if t.tzinfo is not None:
        text = text[:-6]   # "+00:00"
    return (text.rstrip("0") if t.microsecond else text) + "Z"


def nanos(seconds: float) -> int:
    """A Go ``time.Duration`` in JSON: integer nanoseconds."""
    return int(seconds * 1e9)


def entity_change(src: str, event_type: str, event_id: str, entity_type: str, initial: Any, final: Any,
                  metadata: dict[str, Any], when: str | None = None) -> dict:
    """``entityChange``: created, updated, deleted (and ``committed`` after them); camelCase
    names, as upstream's (the one namespace that uses them). The states must come redacted."""
    out: dict[str, Any] = {"namespace": "entityChange", "eventId": event_id, "eventType": event_type,
                           "event_src_id": src, "timestamp": when or timestamp()}
    if metadata:
        out["metadata"] = metadata
    if entity_type:
        out["entityType"] = entity_type
    out["isParentEvent"] = False
    if initial is not None:
        out["initialState"] = initial
    if final is not None:
        out["finalState"] = final
    return out


def entity_committed(src: str, event_id: str, entity_type: str, when: str | None = None) -> dict:
    return {"namespace": "entityChange", "eventId": event_id, "eventType": "committed", "event_src_id": src,
            "timestamp": when or timestamp(), "entityType": entity_type, "isParentEvent": False}


def api_session(src: str, event_type: str, id: str, identity_id: str, ip_address: str) -> dict:
    """``edge.apiSessions``: created, deleted (``refreshed`` and ``exchanged`` are upstream's
    OIDC sessions, which ziti-lite has not). ``token`` holds the session's id."""
    return {"namespace": "edge.apiSessions", "event_type": event_type, "event_src_id": src, "id": id,
            "type": "legacy", "timestamp": timestamp(), "token": id, "identity_id": identity_id,
            "ip_address": ip_address}


def session(src: str, event_type: str, id: str, session_type: str, api_session_id: str, identity_id: str,
            service_id: str) -> dict:
    """``edge.sessions``: created, deleted. ``token`` holds the session's id."""
    return {"namespace": "edge.sessions", "event_type": event_type, "event_src_id": src,
            "session_type": session_type, "id": id, "timestamp": timestamp(), "token": id,
            "api_session_id": api_session_id, "identity_id": identity_id, "service_id": service_id}


def terminator(src: str, event_type: str, row: dict, router_online: bool, total: int, usable_default: int,
               usable_required: int) -> dict:
    """``fabric.terminators``: created, updated, deleted, from a terminators row."""
    return {"namespace": "fabric.terminators", "event_type": event_type, "event_src_id": src,
            "timestamp": timestamp(), "service_id": row["service_id"], "terminator_id": row["id"],
            "router_id": row["router_id"], "host_id": row.get("host_id") or "", "router_online": router_online,
            "precedence": row.get("precedence") or "default", "static_cost": int(row.get("cost") or 0),
            "dynamic_cost": 0, "total_terminators": total, "usable_default_terminators": usable_default,
            "usable_required_terminators": usable_required}


def router(src: str, router_id: str, online: bool) -> dict:
    """``fabric.routers``: router-online, router-offline."""
    return {"namespace": "fabric.routers", "event_type": "router-online" if online else "router-offline",
            "event_src_id": src, "timestamp": timestamp(), "router_id": router_id, "router_online": online}


def sdk(src: str, identity_id: str, online: bool) -> dict:
    """``sdk``: sdk-online, sdk-offline (an identity's first channel opened, its last closed)."""
    return {"namespace": "sdk", "event_type": "sdk-online" if online else "sdk-offline", "event_src_id": src,
            "timestamp": timestamp(), "identity_id": identity_id}


def circuit(src: str, event_type: str, circuit_id: str, client_id: str, service_id: str, terminator_id: str,
            instance_id: str, router_id: str, tags: dict[str, str], *, ingress_id: str = "", egress_id: str = "",
            creation_seconds: float | None = None, cost: int | None = None, failure_cause: str | None = None,
            duration_seconds: float | None = None, nodes: list[str] | None = None,
            links: list[str] | None = None) -> dict:
    """``fabric.circuits`` (version 2): created, deleted, failed. The path's ``nodes`` are its
    routers from ingress to egress with the ``links`` between them; a circuit of one router (the
    embedded router's, a real router's with the terminator on the router dialed) has a path of one
    node and no link."""
    out: dict[str, Any] = {
        "namespace": "fabric.circuits", "version": 2, "event_type": event_type, "event_src_id": src,
        "circuit_id": circuit_id, "timestamp": timestamp(), "client_id": client_id, "service_id": service_id,
        "terminator_id": terminator_id, "instance_id": instance_id}
    if creation_seconds is not None:
        out["creation_timespan"] = nanos(creation_seconds)
    out["path"] = {"nodes": list(nodes) if nodes else [router_id] if router_id else [], "links": list(links or ()),
                   "ingress_id": ingress_id, "egress_id": egress_id}
    out["link_count"] = len(links or ())
    if cost is not None:
        out["path_cost"] = cost
    if failure_cause is not None:
        out["failure_cause"] = failure_cause
    if duration_seconds is not None:
        out["duration"] = nanos(duration_seconds)
    out["tags"] = tags
    return out


def entity_counts(src: str, counts: dict[str, int], error: str = "") -> dict:
    """``edge.entityCounts``: rows per entity type, on an interval."""
    return {"namespace": "edge.entityCounts", "event_src_id": src, "timestamp": timestamp(), "counts": counts,
            "error": error}


def authentication(src: str, success: bool, method: str, *, authenticator_id: str = "", signer_id: str = "",
                   identity_id: str = "", auth_policy_id: str = "", remote_address: str = "", reason: str = "",
                   improper_chain: bool = False) -> dict:
    """``authentication``: success or fail, with the method as upstream names it (``updb``,
    ``cert``, ``ext-jwt``) in ``type``."""
    return {"namespace": "authentication", "event_src_id": src, "timestamp": timestamp(),
            "event_type": "success" if success else "fail", "type": method, "authenticator_id": authenticator_id,
            "external_jwt_signer_id": signer_id, "identity_id": identity_id, "auth_policy_id": auth_policy_id,
            "remote_address": remote_address, "success": success, "reason": reason,
            "improper_client_cert_chain": improper_chain}
