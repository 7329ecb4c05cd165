"""``entityChange`` events and the audit trail's before/after, from every write of the generic
handlers (and of the hand-written code that reports its writes through ``crud.changed``).

One listener for all resources (``crud.listen_all``), inside the write's transaction: it renders
the entity's API detail before and after (secrets redacted), writes the request's audit row in
that same transaction when the entity is the one the route serves (``audit.write_change``; a
write that rolls back leaves no row) and emits ``created``/``updated``/``deleted`` with a
``committed`` after it, published when the transaction commits. Nothing is rendered when no one
reads it (no subscriber of entityChange, no audit trail).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..api import crud
from ..api import render as rendering
from ..api.context import Ctx
from ..api.resource import Resource
from ..errors import NotFound
from ..ids import new_id
from . import audit, shapes

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


def entity_type(collection: str) -> str:
    """Upstream's entity type of a URL collection: ``edge-router-policies`` -> ``edgeRouterPolicies``."""
    head, *rest = collection.split("-")
    return head + "".join(p.title() for p in rest)


def detail(ctx: Ctx, res: Resource, row: dict | None) -> dict | None:
    """The row's API detail without links, secrets redacted: the declared fields, references and
    constants, not what the resource's render hook computes for the caller (a service's
    permissions, an identity's enrollment tokens). JSON-valued fields stay ``msgspec.Raw``
    unless the detail has a secret key to redact (then it is plain JSON values)."""
    return state(ctx, res, row)[0]


def state(ctx: Ctx, res: Resource, row: dict | None) -> tuple[dict | None, Any]:
    """``detail`` and the same detail for the event: ``msgspec.Raw`` of its JSON when it needed
    no redaction (the text encoded once, for the secret scan, is the event's), else the dict."""
    if row is None:
        return None, None
    out = rendering.render_declared(ctx, res, row)
    out.pop("_links", None)
    encoded = _enc.encode(out)
    if shapes.may_hold_secrets(encoded):
        clean = shapes.redact(_dec.decode(encoded))
        return clean, clean
    return out, msgspec.Raw(encoded)


def author(ctx: Ctx, name: str | None) -> dict[str, Any]:
    """Upstream's change-context metadata for a REST change (``name``: the caller's identity's),
    and the API session behind it."""
    scope = ctx.request.scope   # read directly: starlette's properties build objects on every call
    meta: dict[str, Any] = {"src.type": "rest", "src.auth": "edge", "src.method": scope["method"],
                            "src.remote": ctx.client_ip}
    server = scope.get("server")
    if server:
        meta["src.local"] = f"{server[0]}:{server[1]}"
    session = ctx.session
    if session is not None:
        meta["authorType"] = "identity"
        meta["authorId"] = session.identity_id
        meta["authorName"] = name or ""
        if session.id:   # an OIDC login step writes before its API session exists
            meta["apiSessionId"] = session.id
    else:
        meta["authorType"] = "unattributed"
    return meta


def _serves(ctx: Ctx, res: Resource, id: str) -> bool:
    """Whether this write is the one the request is about (its audit row, with the diff): any
    write of the route's resource; for a hand-written operation on one entity of a collection
    (``/cas/{id}/verify``, ``/identities/{id}/disable``) the write of that entity, and for any
    other hand-written operation (``/current-identity/mfa``, ``/identities/{id}/mfa``) the first
    write it reports."""
    route = ctx.route
    if route.resource is not None:
        return route.resource.name == res.name
    if "id" in ctx.params and route.path.split("/")[1] == res.name:
        return ctx.params["id"] == id
    return True


# resource names that are not their entity's collection: upstream's entity type, the audit's name
_TYPES: dict[str, str] = {"current-api-session/certificates": "apiSessionCertificates"}
_AUDIT_NAMES = {"current-api-session/certificates": "api-session-certificates"}


@crud.listen_all
def entity_changed(ctx: Ctx, res: Resource, id: str, before: dict | None, values: dict | None) -> None:
    ctl = ctx.ctl
    bus = ctl.events
    emit = bus.wants("entityChange")
    audited = not ctx.audited and ctl.settings.audit_days > 0 and audit.audits(ctx) and _serves(ctx, res, id)
    if not (emit or audited):
        return
    initial, initial_event = state(ctx, res, before)
    final = final_event = None
    if values is not None:
        try:
            final, final_event = state(ctx, res, crud.get_row(ctx.store, res, id))
        except NotFound:   # written outside the resource's scope: nothing to show
            pass
    session = ctx.session
    caller = session.identity_name if session is not None else None
    if audited:
        audit.write_change(ctx, _AUDIT_NAMES.get(res.name, res.name), id, initial, final, caller)
        ctx.audited = True
    if emit:
        kind = "created" if before is None else "deleted" if values is None else "updated"
        event_id = new_id()
        etype = _TYPES.get(res.name) or _TYPES.setdefault(res.name, entity_type(res.name))
        when = shapes.timestamp()
        bus.emit_all([shapes.entity_change(bus.source_id, kind, event_id, etype, initial_event, final_event,
                                           author(ctx, caller), when),
                      shapes.entity_committed(bus.source_id, event_id, etype, when)], ctx.store)
