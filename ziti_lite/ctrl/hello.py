"""What a router's hello says and what the answer to it carries, for every router line at once.

v1.3 and v1.6 routers dial one reconnecting channel: listeners in header 10, metadata in 11, and
they read the controller's capabilities from header 12 (bits 1-4). v2.0 routers dial a grouped
("multi-underlay") channel: the hello says so (9), names the underlay's type (7), marks the
first underlay of a group (11), moves listeners, metadata and capabilities to 1000-1002, and
refuses an answer without a group secret (10) or without the JWT-sessions capability (bit 6 of
1002). Headers 10 and 11 thus mean different things per line, so every reading of a hello goes
through ``Hello`` (``shared/reference/behaviour/ctrl-channel-v2.md`` §1, §2).

Capabilities announced: to every router 12 = create-terminator-V2 and create-circuit-V2 (v1
routers keep their legacy API-session sync, no data model); to a grouped router also 1002 =
those, JWT legacy sessions and grouped channels (its second, ``ctrl.high`` underlay joins the
group: ``server.py``).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from ..channel import wire
from ..channel.wire import Message
from . import messages
from .messages import H

UNDERLAY_DEFAULT = "ctrl.default"
UNDERLAY_HIGH = "ctrl.high"

V1_CAPABILITIES = (1 << messages.CAP_CREATE_TERMINATOR_V2) | (1 << messages.CAP_CREATE_CIRCUIT_V2)
V2_CAPABILITIES = V1_CAPABILITIES | (1 << messages.CAP_JWT_LEGACY_SESSIONS) | (1 << messages.CAP_GROUPED_CTRL_CHAN)


def mask_bytes(mask: int) -> bytes:
    """A capability mask as the channel library writes it: big-endian big-int bytes."""
    return mask.to_bytes(max(1, (mask.bit_length() + 7) // 8), "big")


def mask_of(raw: bytes | None) -> int:
    return int.from_bytes(raw, "big") if raw else 0


@dataclass(frozen=True, slots=True)
class Hello:
    grouped: bool          # a v2 router's grouped channel
    first: bool            # the first underlay of its group (a new logical channel)
    underlay: str          # ctrl.default / ctrl.high (grouped only)
    connection_id: str     # the group's id on a later underlay or a reconnect ('' on a fresh one)
    secret: bytes          # the group secret offered (later underlays, reconnects), else b''
    new_headers: bool      # listeners and metadata in 1000+ (v2) rather than 10/11 (v1)
    listeners: bytes | None
    metadata: bytes | None
    ctrl_listeners: bytes | None = None    # v2: the control-channel listeners it advertises (1003)

    @classmethod
    def read(cls, m: Message) -> Hello:
        h = m.headers
        grouped = h.get(H.IS_GROUPED, b"") == b"\x01"
        new = grouped or bool(mask_of(h.get(H.CAPABILITIES_V2)) & (1 << messages.ROUTER_CAP_MULTI_CHANNEL))
        return cls(
            grouped=grouped, first=not grouped or h.get(H.IS_FIRST_GROUP_CONNECTION, b"") == b"\x01",
            underlay=m.text(H.TYPE) or UNDERLAY_DEFAULT if grouped else "",
            connection_id=m.text(wire.H.CONNECTION_ID) if grouped else "",
            secret=h.get(H.GROUP_SECRET, b"") if grouped else b"",
            new_headers=new,
            listeners=h.get(H.LISTENERS_V2 if new else H.LISTENERS),
            metadata=h.get(H.ROUTER_METADATA_V2 if new else H.ROUTER_METADATA),
            ctrl_listeners=h.get(H.CTRL_CHAN_LISTENERS))


def answer(hello: Hello, m: Message, controller_id: str, version: str, group: tuple[str, bytes] | None) -> dict:
    """The headers of the hello's successful Result. ``group`` is the logical channel's
    (connection id, secret) for a grouped router: echoed as the router offered them, or new."""
    headers = {
        wire.H.REPLY_FOR: wire.i32(m.seq), wire.H.RESULT_SUCCESS: b"\x01", wire.H.ID: controller_id.encode(),
        wire.H.HELLO_VERSION: version.encode(), H.CAPABILITIES: mask_bytes(V1_CAPABILITIES)}
    if group is None:
        headers[wire.H.CONNECTION_ID] = uuid.uuid4().hex.encode()
        return headers
    headers.update({wire.H.CONNECTION_ID: group[0].encode(), H.GROUP_SECRET: group[1],
                    H.CAPABILITIES_V2: mask_bytes(V2_CAPABILITIES), H.IS_GROUPED: b"\x01",
                    H.TYPE: hello.underlay.encode()})
    return headers


def new_group(hello: Hello) -> tuple[str, bytes]:
    """The (connection id, secret) of a new logical channel: a reconnecting router keeps its
    secret (it compares every later answer with it) and names its connection ``<id>-<n>``."""
    return (hello.connection_id or os.urandom(6).hex()), (hello.secret or uuid.uuid4().bytes)
