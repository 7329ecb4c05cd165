"""Reading a router's hello and writing its answer (no server): the header ids of each router
line, the group a v2 hello offers or is given, and the capabilities each line reads."""

from __future__ import annotations

from ziti_lite.channel.wire import Message
from ziti_lite.ctrl import hello

V1 = {4: b"v1.6.20|x|d|linux|amd64", 10: b"v1-listeners", 11: b"v1-metadata"}
V2_FIRST = {4: b"v2.0.3|x|d|linux|amd64", 9: b"\x01", 7: b"ctrl.default", 11: b"\x01", 1002: b"\x02",
            1000: b"v2-listeners"}


def test_a_v1_hello_keeps_its_headers_and_gets_no_group():
    said = hello.Hello.read(Message(0, -1, V1, b"r1"))
    assert not said.grouped and said.first and not said.new_headers
    assert (said.listeners, said.metadata) == (b"v1-listeners", b"v1-metadata")
    answer = hello.answer(said, Message(0, -1, V1, b"r1"), "ctl", "v1.3.3|x", None)
    assert answer[12] == bytes([0b1010]) and 10 not in answer and 1002 not in answer and answer[0]


def test_a_first_v2_hello_gets_a_new_group_and_the_v2_capabilities():
    m = Message(0, -1, V2_FIRST, b"r2")
    said = hello.Hello.read(m)
    assert said.grouped and said.first and said.new_headers and said.underlay == "ctrl.default"
    assert said.listeners == b"v2-listeners" and said.metadata is None and said.secret == b""
    conn, secret = hello.new_group(said)
    assert conn and len(secret) == 16
    answer = hello.answer(said, m, "ctl", "v1.3.3|x", (conn, secret))
    assert answer[10] == secret and answer[0] == conn.encode() and answer[9] == b"\x01"
    assert int.from_bytes(answer[1002], "big") == (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6)
    assert answer[12] == bytes([0b1010])


def test_a_reconnect_keeps_its_secret_and_names_its_connection():
    said = hello.Hello.read(Message(0, -1, {**V2_FIRST, 0: b"abcd-2", 10: b"s" * 16}, b"r2"))
    assert said.first and hello.new_group(said) == ("abcd-2", b"s" * 16)


def test_a_later_underlay_is_not_first_and_names_its_group():
    h = {k: v for k, v in V2_FIRST.items() if k != 11}
    said = hello.Hello.read(Message(0, -1, {**h, 7: b"ctrl.high", 0: b"abcd", 10: b"s" * 16}, b"r2"))
    assert not said.first and said.underlay == "ctrl.high" and said.connection_id == "abcd"


def test_odd_values_are_read_without_error():
    said = hello.Hello.read(Message(0, -1, {9: b"\x02", 1002: b"", 7: b"\xff\xfe"}, b"r"))
    assert not said.grouped and said.first and not said.new_headers
    assert hello.mask_of(b"\x01\x00") == 256 and hello.mask_bytes(0) == b"\x00"
