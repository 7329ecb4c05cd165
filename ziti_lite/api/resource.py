"""The vocabulary of the resource table: one ``Resource`` per API collection.

A Resource names its table, its stored fields (wire name, storage kind), the fields a filter
may name (upstream's symbols of that collection, declared once: ``filters``), the
msgspec structs that validate create and update bodies (the patch struct is derived), its links
and a few hooks for behaviour that is really special. ``crud.py`` serves every Resource with the
same six handlers, ``routes.py`` mounts them and ``spec.py`` documents them from the same data.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, Union

import msgspec
from msgspec import UNSET, UnsetType

from ..db.filters import Symbol
from ..db.search import SEARCH_INDEXES
from ..db.store import Store
from ..permissions import Need
from . import envelope as env
from .context import Ctx
from .router import AuthLevel

# storage kinds: how a value is kept in its column and rendered on the wire
KINDS = ("string", "int", "float", "bool", "datetime", "json", "set", "map")


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True, eq=False)
class Field:
    name: str                     # wire name, camelCase
    kind: str = "string"
    column: str = ""              # SQL column; defaults to snake_case of the name
    output: bool = True           # rendered in the detail
    nullable: bool = False
    # rendered null when stored empty ("", [] or {}): upstream's storage keeps no value for an
    # empty list or string, so its answers have null there (sets: on unless told otherwise)
    empty_null: bool | None = None
    # a set is written sorted (byte order) and without duplicates, as upstream keeps its sets (the
    # keys of a bucket)

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        if not self.column:
            object.__setattr__(self, "column", snake(self.name))
        if self.empty_null is None:
            object.__setattr__(self, "empty_null", self.kind == "set")

    def symbol(self) -> Symbol:
        if self.kind == "set":
            return Symbol("set", f"SELECT value FROM json_each(t.{self.column})")
        if self.kind == "map":
            return Symbol("tags", f"t.{self.column}")
        kind = "string" if self.kind == "json" else self.kind
        return Symbol(kind, f"t.{self.column}")


@dataclass(frozen=True)
class Ref:
    """A detail field naming the entity whose id is in ``column``: ``{entity, id, name, _links}``
    with ``entity`` the URL collection, the name read from ``table``; null when the column is."""
    name: str                     # wire name
    column: str
    collection: str
    table: str = ""               # defaults to the collection's

    def render(self, store: Store, row: dict) -> dict | None:
        id = row[self.column]
        if id is None:
            return None
        table = self.table or self.collection.replace("-", "_")
        columns = ", ".join(["name", *(c for _, c, _ in env.ROW_LINKS.get(self.collection, ())),
                             *env.STATE_LINKS.get(self.collection, ((), None))[0]])
        ref = store.one(f"SELECT {columns} FROM {table} WHERE id = ?", (id,))
        return env.entity_ref(self.collection, self.collection, id, ref["name"] if ref else None, ref)


BASE_SYMBOLS = {
    "id": Symbol("string", "t.id"),
    "createdAt": Symbol("datetime", "t.created_at"),
    "updatedAt": Symbol("datetime", "t.updated_at"),
    "tags": Symbol("tags", "t.tags"),
    "isSystem": Symbol("bool", "t.is_system"),
}

# ---------------------------------------------------------------- the hooks of a Resource
# Column values and stored rows travel as dicts keyed by column name. Every hook runs inside the
# write's transaction but ``render``. A prepare hook may leave in ``values`` keys that are no
# column (they are stored nowhere): that is how it hands data to the after-write hook and the
# listeners of the same write (an identity's ``enrollment``), nothing is kept on the Ctx.
Row: TypeAlias = dict[str, Any]
# prepare(ctx, values, existing): validates and completes the values (existing: None on create)
Prepare: TypeAlias = Callable[[Ctx, Row, Row | None], None]
# render(ctx, row, out): adds the computed fields of the detail ``out`` of ``row``
Render: TypeAlias = Callable[[Ctx, Row, dict[str, Any]], None]
# before_delete(ctx, row): refuses the delete (raises) or cascades
BeforeDelete: TypeAlias = Callable[[Ctx, Row], None]
# before_read(ctx, row): refuses the detail of a row this caller may not see (raises)
BeforeRead: TypeAlias = Callable[[Ctx, Row], None]
# after_write(ctx, id, before, values) after every create (before None), update and delete
# (values None): keeps derived data in step. ``crud.listen`` listeners have the same shape.
AfterWrite: TypeAlias = Callable[[Ctx, str, Row | None, Row | None], None]


@dataclass(eq=False)
class Resource:
    name: str                                   # URL collection, e.g. "identities"
    entity: str                                 # singular used in messages, e.g. "identity"
    fields: tuple[Field, ...] = ()
    table: str = ""
    create: type | None = None               # msgspec Struct for POST bodies
    update: type | None = None               # msgspec Struct for PUT bodies; the create one when not given
    patch: type | None = None                # derived from update when not given
    ops: tuple[str, ...] = ("list", "detail", "create", "update", "patch", "delete")
    auth: dict[str, AuthLevel] = field(default_factory=dict)  # op -> level (default admin)
    # op -> level on the client API, where it differs from ``auth`` (upstream's /controllers: any
    # session on the client API, admin-level on the management one)
    client_auth: dict[str, AuthLevel] = field(default_factory=dict)
    # the entity of OpenZiti 2.0's permissions its admin-level routes need (``permissions.py``),
    # with the action of each op (list and detail read, create, update and patch update, delete);
    # "" leaves them to admins
    permission: str = ""
    apis: tuple[str, ...] = ("management",)
    links: tuple[str, ...] = ()                 # sub-collections linked from the detail
    row_links: tuple[tuple[str, str, str], ...] = ()  # (link, column, collection): links to entities the row names
    refs: tuple[Ref, ...] = ()                  # references to other entities, after the fields
    constants: dict[str, Any] = field(default_factory=dict)  # detail fields of a fixed value, after the refs
    computed: tuple[Field, ...] = ()            # fields the render hook adds: in the spec, not stored
    scope: str = ""                             # SQL condition every row of this resource meets
    scope_values: dict[str, Any] = field(default_factory=dict)  # columns set on create to meet it
    # the ZitiQL symbols of the collection: upstream's store's public symbols beyond the base five,
    # exactly (``meta.filterableFields``, in this order). Each names a field or a key of
    # ``extra_symbols`` (symbols with SQL of their own); any other name in a filter is refused
    # with INVALID_FILTER, as upstream refuses its other symbols (sets of related entities, ...).
    filters: tuple[str, ...] = ()
    extra_symbols: dict[str, Symbol] = field(default_factory=dict)
    protect_system: bool = False                # is_system rows refuse PUT/PATCH/DELETE (400)
    # hooks (their types above): what is really special about the resource
    prepare: Prepare | None = None
    render: Render | None = None
    before_delete: BeforeDelete | None = None
    before_read: BeforeRead | None = None
    after_write: AfterWrite | None = None

    def __post_init__(self) -> None:
        if not self.table:
            self.table = self.name.replace("-", "_")
        if self.update is None:
            self.update = self.create   # a PUT replaces what a POST sets, unless the resource says otherwise
        if self.update is not None and self.patch is None:
            self.patch = derive_patch(self.update)
        if "/" not in self.name and "management" in self.apis:
            env.SUB_LINKS.setdefault(self.name, self.links)
            env.ROW_LINKS.setdefault(self.name, self.row_links)
        self.by_name = {f.name: f for f in self.fields}
        self.by_column = {f.column: f for f in self.fields}
        self.symbols = dict(BASE_SYMBOLS)
        for name in self.filters:
            self.symbols[name] = self._symbol(name)
        self.filterable = [*BASE_SYMBOLS, *self.filters]
        self.json_columns = {f.column for f in self.fields if f.kind in ("json", "set", "map")}
        self.sorted_columns = {f.column for f in self.fields if f.kind == "set"}
        self.bool_columns = {f.column for f in self.fields if f.kind == "bool"}

    def _symbol(self, name: str) -> Symbol:
        if name in self.extra_symbols:
            return self.extra_symbols[name]
        f = self.by_name.get(name)
        assert f is not None, f"{self.name}: filter {name!r} is neither a field nor an extra symbol"
        if SEARCH_INDEXES.get(self.table) == f.column and f.kind == "string":
            return Symbol("string", f"t.{f.column}", search=self.table)
        return f.symbol()

    def level(self, op: str, api: str = "management") -> AuthLevel:
        if api == "client" and op in self.client_auth:
            return self.client_auth[op]
        return self.auth.get(op, "admin")

    def need(self, op: str, api: str = "management") -> Need:
        """What its ``op`` route needs at the admin level: (entity, action), or None (admins only)."""
        if not self.permission or self.level(op, api) != "admin":
            return None
        return self.permission, OP_ACTIONS[op]


# the action of each generic operation (permissions.ACTIONS)
OP_ACTIONS = {"list": "read", "detail": "read", "create": "create", "update": "update", "patch": "update",
              "delete": "delete"}


def derive_patch(update: type, default: Any = UNSET, keep: tuple[str, ...] = (), nested: bool = False) -> type:
    """A PATCH struct: every field of the PUT struct optional (absent = ``default``, UNSET unless
    told), wire renames kept, the fields in ``keep`` left as they are (still required); with
    ``nested``, nested structs with required fields are derived the same way (every leaf
    optional, absent = None), for bodies whose PATCH merges leaves."""
    fields: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(update):
        if f.name in keep:
            fields.append((f.name, f.type, msgspec.field(name=f.encode_name) if f.required else f.default))
            continue
        t = _patch_type(f.type) if nested else f.type
        options = (t, None) if default is None else (t, None, UnsetType)
        fields.append((f.name, Union[options], msgspec.field(default=default, name=f.encode_name)))  # noqa: UP007
    name = update.__name__.removesuffix("Update").removesuffix("Create")   # the PUT struct may be the create one
    return msgspec.defstruct(name.replace("Update", "") + "Patch", fields,
                             rename="camel", kw_only=True)


def _patch_type(t: Any) -> Any:
    """A nested struct type (alone or in a union) with required fields becomes its patch form."""
    members = typing.get_args(t) if typing.get_origin(t) in (Union, types.UnionType) else (t,)
    out = []
    for m in members:
        if isinstance(m, type) and issubclass(m, msgspec.Struct) and any(
                f.required for f in msgspec.structs.fields(m)):
            m = derive_patch(m, default=None, nested=True)
        out.append(m)
    return Union[tuple(out)] if len(out) > 1 else out[0]  # noqa: UP007
