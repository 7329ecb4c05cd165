"""What the fabric API's handlers share: the API name, entity references in upstream's fabric
form (a router's and a service's reference link their terminators too), and name lookups for
a whole page at once."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

FABRIC = ("fabric",)
_enc = msgspec.json.Encoder()

# collections whose references carry a nested ``terminators`` link, as upstream's link factories
_NESTED = {"routers": ("terminators",), "services": ("terminators",)}


def ref(collection: str, id: str, name: str) -> dict:
    """An ``entityRef``: ``{_links, entity, id, name}`` (``name`` left out when empty, as upstream)."""
    links = {"self": {"href": f"./{collection}/{id}"}}
    for sub in _NESTED.get(collection, ()):
        links[sub] = {"href": f"./{collection}/{id}/{sub}"}
    out: dict = {"_links": links, "entity": collection, "id": id}
    if name:
        out["name"] = name
    return out


def names(store, table: str, ids: Iterable[str]) -> dict[str, str]:
    """id -> name of the rows of ``table`` (``routers`` or ``services``) among ``ids``, in one query."""
    assert table in ("routers", "services")
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = store.all(f"SELECT id, name FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
                     (_enc.encode(wanted).decode(),))
    return {r["id"]: r["name"] for r in rows}
