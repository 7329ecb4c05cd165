"""``/fabric/v1/ws-api`` spoken by a Python WebSocket client as the ``ziti`` CLI speaks it:
channel V2 messages in binary frames, a StreamEventsRequest, a Result, then events; refused
without an admin session; ended with the API session. (``make interop`` runs the real CLI.)"""

from __future__ import annotations

import json
import ssl
import struct

import pytest
import websockets.exceptions
from websockets.sync.client import connect

from tests.conftest import MGMT
from tests.enroll.conftest import running
from ziti_lite.events import wsapi

pytestmark = pytest.mark.slow   # a live server over TLS


@pytest.fixture(scope="module")
def live(template_db, tmp_path_factory):
    with running(template_db, tmp_path_factory.mktemp("wsapi")) as handle:
        yield handle


def _open(handle, token: str | None):
    ctx = ssl.create_default_context(cadata=handle.ca_bundle)
    headers = {"zt-session": token} if token else {}
    return connect(f"wss://127.0.0.1:{handle.port}/fabric/v1/ws-api", ssl=ctx, additional_headers=headers,
                   open_timeout=10)


def _request(ws, subscriptions: list[dict], seq: int = 1) -> tuple[int, dict, bytes]:
    body = json.dumps({"format": "json", "subscriptions": subscriptions}).encode()
    ws.send(wsapi.encode(wsapi.STREAM_EVENTS_REQUEST, seq, {}, body))
    content, _, headers, reply = wsapi.decode(ws.recv(timeout=10))
    return content, headers, reply


def test_stream_events_over_the_channel(live):
    admin = live.admin()
    with _open(live, admin.token) as ws:
        content, headers, body = _request(ws, [{"type": "entityChange"}, {"type": "fabric.links"}], seq=7)
        assert content == wsapi.RESULT and headers[wsapi.RESULT_SUCCESS] == b"\x01"
        assert struct.unpack("<I", headers[wsapi.REPLY_FOR])[0] == 7 and body == b"success"
        sid = admin.create("services", {"name": "ws-svc", "encryptionRequired": True})
        content, _, _, body = wsapi.decode(ws.recv(timeout=10))
        event = json.loads(body)
        assert content == wsapi.STREAM_EVENTS_EVENT
        assert event["namespace"] == "entityChange" and event["finalState"]["id"] == sid
        # a bad request is answered with a failed Result, the stream goes on
        ws.send(wsapi.encode(wsapi.STREAM_EVENTS_REQUEST, 8, {}, b'{"format": "yaml"}'))
        content = wsapi.STREAM_EVENTS_EVENT
        while content == wsapi.STREAM_EVENTS_EVENT:   # the change's committed event may come first
            content, _, headers, _ = wsapi.decode(ws.recv(timeout=10))
        assert content == wsapi.RESULT and headers[wsapi.RESULT_SUCCESS] == b"\x00"
        # the API session ends: so does the stream
        assert admin.client.delete(MGMT + "/current-api-session",
                                   headers={"zt-session": admin.token}).status_code == 200
        with pytest.raises(websockets.exceptions.ConnectionClosed):
            while True:
                ws.recv(timeout=10)


def test_refused_without_an_admin_session(live):
    for token in (None, "6b4f9e3c-0000-4000-8000-000000000000"):
        with pytest.raises(websockets.exceptions.InvalidStatus) as e:
            _open(live, token)
        assert e.value.response.status_code == 403


def test_decode_refuses_broken_messages():
    good = wsapi.encode(wsapi.STREAM_EVENTS_REQUEST, 1, {5: b"x"}, b"{}")
    assert wsapi.decode(good) == (wsapi.STREAM_EVENTS_REQUEST, 1, {5: b"x"}, b"{}")
    for bad in (good[:-1], b"\x00" + good[1:], good[:10], good[:20] + b"\xff" * 8):
        with pytest.raises(ValueError):
            wsapi.decode(bad)
