"""``derive_patch``: PATCH bodies derived from the PUT structs, and the PUT struct defaulting to
the create one (``ziti_lite/api/resource.py``)."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET

from ziti_lite.api.resource import Resource, derive_patch
from ziti_lite.wiring import resources


class Inner(msgspec.Struct, rename="camel", kw_only=True):
    some_flag: bool
    note: str | None = None


class ThingUpdate(msgspec.Struct, rename="camel", kw_only=True):
    name: str
    service_id: str = msgspec.field(name="service")
    inner: Inner
    secret: str


def test_every_field_optional_and_unset_by_default():
    patch = derive_patch(ThingUpdate)
    assert patch.__name__ == "ThingPatch"
    body = msgspec.json.decode(b"{}", type=patch)
    assert all(getattr(body, f) is UNSET for f in patch.__struct_fields__)


def test_wire_renames_are_kept():
    patch = derive_patch(ThingUpdate)
    body = msgspec.json.decode(b'{"service": "s1"}', type=patch)
    assert body.service_id == "s1"
    assert {f.encode_name for f in msgspec.structs.fields(patch)} == {"name", "service", "inner", "secret"}


def test_nested_structs_kept_unless_asked():
    with pytest.raises(msgspec.ValidationError):  # the nested struct still requires its fields
        msgspec.json.decode(b'{"inner": {}}', type=derive_patch(ThingUpdate))
    body = msgspec.json.decode(b'{"inner": {"note": "n"}}', type=derive_patch(ThingUpdate, nested=True))
    assert body.inner.some_flag is None and body.inner.note == "n"
    assert type(body.inner).__name__ == "InnerPatch"


def test_default_and_kept_fields():
    patch = derive_patch(ThingUpdate, default=None, keep=("secret",))
    with pytest.raises(msgspec.ValidationError, match="secret"):
        msgspec.json.decode(b"{}", type=patch)
    body = msgspec.json.decode(b'{"secret": "x"}', type=patch)
    assert body.name is None and body.secret == "x"


class ThingCreate(msgspec.Struct, rename="camel", kw_only=True):
    name: str


def test_put_takes_the_create_body_unless_told_otherwise():
    same = Resource("things-a", "thing", create=ThingCreate, apis=())
    assert same.update is ThingCreate
    assert same.patch is not None and same.patch.__name__ == "ThingPatch"
    assert msgspec.json.decode(b"{}", type=same.patch).name is UNSET
    own = Resource("things-b", "thing", create=ThingCreate, update=ThingUpdate, apis=())
    assert own.update is ThingUpdate and own.patch is not None and own.patch.__name__ == "ThingPatch"
    assert Resource("things-c", "thing", ops=("list",), apis=()).update is None


def test_no_resource_declares_an_update_struct_that_only_repeats_its_create():
    """An ``XUpdate(XCreate): pass`` says nothing the default does not."""
    repeats = [r.name for r in resources() if r.create is not None and r.update is not r.create
               and r.update is not None and r.update.__bases__ == (r.create,)
               and r.update.__struct_fields__ == r.create.__struct_fields__]
    assert not repeats, repeats
