"""Success and error envelopes, encoded once with msgspec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from starlette.responses import Response

from ..errors import ApiError
from ..ids import new_id
from ..logs import REQUEST_ID

_enc = msgspec.json.Encoder()
encode = _enc.encode
ERROR_META = {"apiEnrollmentVersion": "0.0.1", "apiVersion": "0.0.1"}
EMPTY = b'{"data":{},"meta":{}}'


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else encode(content)


def ok(data: Any, meta: Any = None, status: int = 200, headers: dict | None = None) -> JSON:
    return JSON({"data": data, "meta": {} if meta is None else meta}, status_code=status, headers=headers)


def ok_without_meta(data: Any) -> JSON:
    """An answer whose ``meta`` is null: upstream's current-identity and policy advice."""
    return JSON({"data": data, "meta": None})


def empty(status: int = 200) -> JSON:
    return JSON(EMPTY, status_code=status)


def created(id: str, href: str) -> JSON:
    return JSON({"data": {"id": id, "_links": {"self": {"href": href}}}, "meta": {}}, status_code=201)


def listing(rows: list, limit: int, offset: int, total: int, filterable: list[str] | None) -> JSON:
    meta: dict[str, Any] = {"pagination": {"limit": limit, "offset": offset, "totalCount": total}}
    if filterable:
        meta["filterableFields"] = filterable
    return JSON({"data": rows, "meta": meta})


def error_body(err: ApiError) -> dict:
    e: dict[str, Any] = {"code": err.code, "message": err.message, "requestId": REQUEST_ID.get() or new_id()}
    if err.cause:
        e["cause"] = err.cause
    return {"error": e, "meta": ERROR_META}


def error_response(err: ApiError) -> JSON:
    response = JSON(error_body(err), status_code=err.status)
    if err.status == 401:
        response.raw_headers.append((b"www-authenticate", www_authenticate(err)))
    return response


def www_authenticate(err: ApiError) -> bytes:
    """Every 401 says why in a ``WWW-Authenticate`` challenge, as upstream v2.0 does (RFC 6750's
    form; clients of v1.3.3 ignore it): the scheme is the ``zt-session`` header the API takes,
    ``error`` the envelope's code, ``error_description`` the reason."""
    reason = err.challenge or ((err.cause or {}).get("message") if isinstance(err.cause, dict) else None) \
        or err.message
    text = " ".join(str(reason).split()).replace("\\", "\\\\").replace('"', '\\"')
    value = f'zt-session realm="openziti", error="{err.code.lower()}", error_description="{text}"'
    return value.encode("latin-1", "replace")


# collection -> the sub-collection links of its detail, and -> (link, column, target collection)
# links to the entities its row names: filled by each Resource, so an embedded reference carries
# the referenced entity's full ``_links`` as upstream's do
SUB_LINKS: dict[str, tuple[str, ...]] = {}
ROW_LINKS: dict[str, tuple[tuple[str, str, str], ...]] = {}
# collection -> (columns, fn(id, row) -> links): the links a detail has in some states only (an
# unverified CA's verify, an auto-enrolling CA's jwt), which references to it carry too
STATE_LINKS: dict[str, tuple[tuple[str, ...], Callable[[str, dict], dict]]] = {}


def link(href: str) -> dict:
    return {"href": href}


def links(collection: str, id: str, subs: tuple[str, ...] = ()) -> dict:
    out = {"self": {"href": f"./{collection}/{id}"}}
    for s in subs:
        out[s] = {"href": f"./{collection}/{id}/{s}"}
    return out


def base(row: Any, collection: str, subs: tuple[str, ...] = (), link_map: dict | None = None) -> dict:
    """The fields every entity's detail starts with: id, createdAt, updatedAt, tags (the stored
    JSON text, or {} for a row without tags) and _links (self and ``subs``, unless ``link_map``)."""
    id = row["id"]
    tags = row.get("tags")
    return {"id": id, "createdAt": row["created_at"], "updatedAt": row["updated_at"],
            "tags": {} if tags is None else msgspec.Raw(tags),
            "_links": links(collection, id, subs) if link_map is None else link_map}


def entity_ref(entity: str, collection: str, id: str | None, name: str | None,
               row: dict | None = None) -> dict | None:
    """``{entity, id, name, _links}`` of a referenced entity, its links those of its own detail
    (``row``: its columns the links to other entities need; links without a value are left out)."""
    if id is None:
        return None
    out = links(collection, id, SUB_LINKS.get(collection, ()))
    for name_, column, target in ROW_LINKS.get(collection, ()):
        if row is not None and row.get(column):
            out[name_] = {"href": f"./{target}/{row[column]}"}
    state = STATE_LINKS.get(collection)
    if state is not None and row is not None:
        out.update(state[1](id, row))
    return {"entity": entity, "id": id, "name": name, "_links": out}
