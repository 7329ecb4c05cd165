"""The relay's data-frame encoder writes the very bytes of the general encoder, which the
decoder reads back: SDKs see no difference on the wire."""

from __future__ import annotations

import pytest

from ziti_lite.channel import wire
from ziti_lite.channel.wire import Content, H


@pytest.mark.parametrize("flags", [None, b"\x02\x00\x00\x00"])
@pytest.mark.parametrize("conn_id", [1, 0x7FFFFFFF, 0xFFFFFFFF, -1])
@pytest.mark.parametrize("body", [b"", b"x" * 1024, bytes(range(256)) * 130])
def test_encode_data_writes_the_general_encoding(flags, conn_id, body):
    headers = {H.CONN_ID: wire.u32(conn_id), H.SEQ: b"\x07\x00\x00\x00"}
    if flags is not None:
        headers[H.FLAGS] = flags
    frame = wire.encode_data(42, conn_id, b"\x07\x00\x00\x00", flags, body)
    assert frame == wire.encode(Content.DATA, 42, headers, body)
    decoder = wire.Decoder()
    decoder.feed(wire.encode(Content.HELLO, 1, {}))   # past the hello's small limits
    (m,) = decoder.feed(frame)
    assert (m.content, m.seq, m.body) == (Content.DATA, 42, body)
    assert m.headers == headers


def test_encode_data_keeps_an_unusual_sequence_header_as_sent():
    # a peer's sequence header of another length is relayed unchanged, as the general encoder does
    frame = wire.encode_data(3, 9, b"\x01\x02", None, b"body")
    assert frame == wire.encode(Content.DATA, 3, {H.CONN_ID: wire.u32(9), H.SEQ: b"\x01\x02"}, b"body")
