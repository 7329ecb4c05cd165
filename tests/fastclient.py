"""A TestClient whose HTTP requests cost one hop into the app's event loop.

Starlette's TestClient streams each response through its portal: about eight calls from the test's
thread into the loop's thread per request, ~3 ms each time on a busy two-core machine, where the
app itself answers in a fraction of that. The fast tests send thousands of requests, so
``FastClient`` runs the whole exchange (the request body in, the response out) as one coroutine
in one portal call. What it cannot do that way it hands to Starlette's own transport: WebSocket
sessions and the event stream (``text/event-stream``, a response that does not end). Everything
else is the same client: the lifespan, ``app_state``, cookies, exceptions raised from the app.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import anyio
import httpx
from starlette.testclient import TestClient

STREAMING = ("/ziti-lite/v1/events",)   # GET paths whose answers stream until the client leaves


class FastClient(TestClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._transport = _OneHop(self, self._transport)


class _OneHop(httpx.BaseTransport):
    def __init__(self, owner: TestClient, fallback: Any) -> None:
        self.owner, self.fallback = owner, fallback

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme in ("ws", "wss") or (request.method == "GET" and url.path.startswith(STREAMING)):
            return self.fallback.handle_request(request)
        headers = [] if "host" in request.headers else [(b"host", url.netloc)]
        headers += [(k.lower().encode(), v.encode()) for k, v in request.headers.multi_items()]
        scope = {
            "type": "http", "http_version": "1.1", "method": request.method, "path": unquote(url.path),
            "raw_path": url.raw_path.split(b"?", 1)[0], "root_path": self.fallback.root_path,
            "scheme": url.scheme, "query_string": url.query, "headers": headers,
            "client": self.fallback.client,
            "server": [url.raw_host.decode("ascii"), url.port or {"http": 80, "https": 443}[url.scheme]],
            "extensions": {"http.response.debug": {}}, "state": self.fallback.app_state.copy(),
        }
        with self.owner._portal_factory() as portal:
            status, out_headers, body = portal.call(self._exchange, scope, request.read())
        return httpx.Response(status, headers=out_headers, content=body, request=request)

    async def _exchange(self, scope: dict, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        done = anyio.Event()
        sent = False
        start: dict = {}
        chunks: list[bytes] = []

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body}
            await done.wait()   # the app listens for a disconnect: there is none before the end
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
                if not message.get("more_body", False):
                    done.set()

        try:
            await self.fallback.app(scope, receive, send)
        except Exception:
            if self.fallback.raise_server_exceptions:
                raise
            if not start:   # as Starlette's client: a bare 500 where nothing was answered
                start.update(status=500, headers=[])
        finally:
            done.set()
        headers = [(k.decode(), v.decode()) for k, v in start.get("headers", [])]
        return start["status"], headers, b"".join(chunks) if scope["method"] != "HEAD" else b""
