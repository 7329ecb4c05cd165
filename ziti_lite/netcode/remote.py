"""The management API of a running controller (ziti-lite or OpenZiti) over HTTPS, as the admin.

The server is verified against ``--ca`` or, without it, the CA bundle the controller publishes
at ``/.well-known/est/cacerts`` (fetched once without verification, as ``ziti edge login`` does
when it offers to trust a controller); the login is a password login and the API session is
deleted again on ``close``.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import ssl
import urllib.parse
import warnings
from typing import Any

from cryptography.hazmat.primitives.serialization import Encoding, pkcs7

from ..exchange import ApiBase
from .document import NetcodeError

MANAGEMENT = "/edge/management/v1"


def published_ca(host: str, port: int, timeout: float = 10.0) -> str:
    """The controller's ``/.well-known/est/cacerts`` bundle (base64 PKCS#7) as PEM."""
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(host, port, context=insecure, timeout=timeout)
    try:
        conn.request("GET", "/.well-known/est/cacerts", headers={"accept": "application/pkcs7-mime"})
        reply = conn.getresponse()
        raw = reply.read()
        if reply.status != 200:
            raise NetcodeError(f"{host}:{port}: /.well-known/est/cacerts answered {reply.status}: pass --ca")
    finally:
        conn.close()
    try:
        with warnings.catch_warnings():   # OpenZiti's bundle is BER (unsorted SET): cryptography warns, reads it
            warnings.simplefilter("ignore", UserWarning)
            certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(raw))
    except ValueError as e:
        raise NetcodeError(f"{host}:{port}: unreadable /.well-known/est/cacerts ({e}): pass --ca") from None
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


class RemoteApi(ApiBase):
    def __init__(self, url: str, username: str, password: str, ca_file: str | None = None, timeout: float = 30.0):
        parsed = urllib.parse.urlsplit(url if "://" in url else "https://" + url)
        if parsed.scheme != "https" or not parsed.hostname:
            raise NetcodeError(f"--controller {url}: expected https://HOST[:PORT]")
        self.host, self.port = parsed.hostname, parsed.port or 443
        self.url = f"https://{parsed.netloc}"
        self.timeout = timeout
        try:
            if ca_file:
                context = ssl.create_default_context(cafile=ca_file)
            else:
                context = ssl.create_default_context(cadata=published_ca(self.host, self.port, timeout))
        except (OSError, ssl.SSLError) as e:
            raise NetcodeError(f"--controller {url}: {e}") from None
        self.context = context
        self.conn: http.client.HTTPSConnection | None = None
        self.token: str | None = None
        # lowercase hex SHA-1 of the server's certificate: ziti-lite's embedded edge router has it too
        self.server_fingerprint: str | None = None
        status, body = self.call("POST", "/authenticate?method=password", {"username": username, "password": password})
        if status != 200:
            self.close()
            raise NetcodeError(f"--controller {url}: login as {username!r} refused ({status} {_code(body)})")
        self.token = body["data"]["token"]

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"accept": "application/json"}
        if payload is not None:
            headers["content-type"] = "application/json"
        if self.token:
            headers["zt-session"] = self.token
        for attempt in (0, 1):   # one retry on a keep-alive connection the server closed meanwhile
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                                        timeout=self.timeout)
            try:
                self.conn.request(method, MANAGEMENT + path, body=payload, headers=headers)
                if self.server_fingerprint is None and self.conn.sock is not None:
                    der = self.conn.sock.getpeercert(binary_form=True)
                    self.server_fingerprint = hashlib.sha1(der).hexdigest() if der else None
                reply = self.conn.getresponse()
                raw = reply.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise NetcodeError(f"{self.url}: the connection was closed") from None
            except (OSError, ssl.SSLError) as e:
                self.conn.close()
                self.conn = None
                raise NetcodeError(f"{self.url}: {e}") from None
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = {"error": {"code": "NOT_JSON", "message": raw[:200].decode(errors="replace")}}
        return reply.status, decoded

    def close(self) -> None:
        if self.token:
            self.call("DELETE", "/current-api-session")
            self.token = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _code(body: Any) -> str:
    error = (body or {}).get("error") or {}
    return str(error.get("code") or error.get("message") or body)
