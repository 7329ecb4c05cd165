"""The control channel's protobuf codec against bytes written by hand (``fake_router.py``'s
independent writer) and against malformed input."""

from __future__ import annotations

import pytest

from tests.ctrl.fake_router import f_int, f_str, read_pb, varint
from ziti_lite.ctrl import messages, pb


def test_decoding_what_a_router_writes():
    address = f_str(10, "tls:1.2.3.4:3022") + f_str(20, "tls") + f_str(30, "1.2.3.4") + f_int(40, 3022)
    listener = f_str(10, f_str(10, address))
    body = f_str(1, "v1.3.3") + f_str(2, "site-a") + f_str(3, "tls") + listener + f_str(99, "unknown field")
    hello = pb.decode(messages.CLIENT_HELLO, body)
    assert hello["version"] == "v1.3.3" and hello["hostname"] == "site-a" and hello["protocols"] == ["tls"]
    assert hello["listeners"][0]["address"] == {"value": "tls:1.2.3.4:3022", "protocol": "tls",
                                                "hostname": "1.2.3.4", "port": 3022}
    assert hello["data"] == {} and hello["protocolPorts"] == []          # proto3 defaults filled


def test_what_the_controller_writes_reads_back_field_by_field():
    route = {"circuitId": "c1", "attempt": 2, "timeout": 10**10,
             "egress": {"binding": "edge", "address": "e", "destination": "t", "peerData": {1003: b"pk"}},
             "forwards": [{"srcAddress": "a", "dstAddress": "l", "dstType": messages.DEST_LINK},
                          {"srcAddress": "l", "dstAddress": "a", "dstType": messages.DEST_START}],
             "context": {}, "tags": {"serviceId": "s"}}
    data = pb.encode(messages.ROUTE, route)
    raw = read_pb(data)
    assert raw[1] == [b"c1"] and raw[2] == [2] and raw[6] == [10**10]
    assert read_pb(raw[4][1]).get(3) is None                            # dstType Start (0) is left out
    assert pb.decode(messages.ROUTE, data)["forwards"][0]["dstType"] == messages.DEST_LINK
    back = pb.decode(messages.ROUTE, data)
    assert back["egress"]["peerData"] == {1003: b"pk"} and back["tags"] == {"serviceId": "s"}


def test_numbers_packed_or_not_and_negative():
    packed = f_str(1, varint(1) + varint(2))
    assert pb.decode(messages.ROUTER_METADATA, packed)["capabilities"] == [1, 2]
    unpacked = f_int(1, 1) + f_int(1, 3)
    assert pb.decode(messages.ROUTER_METADATA, unpacked)["capabilities"] == [1, 3]
    assert pb.decode(messages.FAULT, f_int(1, -1))["subject"] == -1       # ten-byte varint
    assert pb.encode(messages.ROUTER_METADATA, {"capabilities": [1]}) == f_str(1, varint(1))


@pytest.mark.parametrize("data", [
    b"\x0a\xff\xff\xff\x0f",          # a length past the end
    b"\x0a",                          # a truncated length
    b"\x08" + b"\xff" * 11,           # a varint too long
    b"\x0b\x00",                      # wire type 3 (groups): refused
    b"\x00\x01",                      # field number 0
    b"\x0a\x02\xff\xfe",              # a string that is not UTF-8
])
def test_malformed_input_is_refused(data):
    with pytest.raises(pb.PbError):
        pb.decode(messages.CLIENT_HELLO, data)


def test_messages_nested_too_deeply_are_refused():
    nested = pb.Msg("N", (pb.Field(1, "n", "bytes"),))
    deep = pb.Msg("D", (pb.Field(1, "d", nested),))
    assert pb.decode(deep, f_str(1, f_str(1, b"x")))["d"] == {"n": b"x"}
    recursive = pb.Msg("R", ())
    object.__setattr__(recursive, "fields", (pb.Field(1, "r", recursive),))
    blob = b""
    for _ in range(40):
        blob = f_str(1, blob)
    with pytest.raises(pb.PbError):
        pb.decode(recursive, blob)


def test_header_encodings_of_the_channel_library():
    from tests.ctrl.fake_router import string_slice, u32_map, u32_map_bytes
    assert messages.decode_strings(string_slice(["a", "bc"])) == ["a", "bc"]
    assert messages.decode_u32_map(u32_map_bytes({1003: b"k", 7: b""})) == {1003: b"k", 7: b""}
    assert u32_map(messages.encode_u32_map({1: b"x"})) == {1: b"x"}
    assert messages.decode_strings(b"") == [] and messages.encode_u32_map({}) == b""
    for bad in (b"\x01", b"\x02\x00\x00\x00\x05\x00\x00\x00ab", b"\xff\x00\x00\x00"):
        with pytest.raises(ValueError):
            messages.decode_strings(bad)
