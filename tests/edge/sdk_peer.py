"""A real SDK peer for the data-plane tests: the OpenZiti C SDK (libziti 0.29 from the
``openziti`` wheel) in its own process, driven by JSON lines on stdin, answering with JSON lines
on stdout. The SDK's threads and global state stay out of the pytest process.

    python sdk_peer.py host IDENTITY_JSON SERVICE [NAME]
        binds SERVICE, prints {"event": "bound"}; every accepted connection is answered: the
        first line a client sends is echoed with NAME as prefix (``NAME:line``), and after it
        every byte is echoed back unchanged until the client's FIN, which is reported as
        {"event": "eof", "bytes": N}; the host then ends its side with a FIN of its own (the
        wrapper sends nothing on a bare close of an accepted socket).
    python sdk_peer.py dial IDENTITY_JSON
        prints {"event": "loaded"}, then runs one command per stdin line:
        {"op": "echo", "service": S, "line": "..."}   -> {"event": "echo", "reply": "...", ...}
        {"op": "bulk", "service": S, "size": N}       -> {"event": "bulk", "sent": sha, "got": sha, ...}
        {"op": "hold", "service": S, "line": "..."}   -> echo, then waits for the connection to end:
                                                          {"event": "ended", "after": seconds}
        every failure: {"event": "error", "op": ..., "message": ..., "after": seconds}
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time

_lock = threading.Lock()


def say(**event) -> None:
    with _lock:
        print(json.dumps(event), flush=True)


def _read_line(sock) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf


def host(ztx_path: str, service: str, name: str) -> None:
    import openziti  # noqa: PLC0415 - only in this process

    ztx = openziti.load(ztx_path)
    server = ztx.bind(service)
    server.listen(16)
    say(event="bound")

    def serve(conn) -> None:
        total = 0
        try:
            line = _read_line(conn)
            conn.sendall(name.encode() + b":" + line)
            total += len(line)
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                total += len(data)
                conn.sendall(data)
            say(event="eof", bytes=total)
            conn.shutdown(socket.SHUT_WR)
        except OSError as e:
            say(event="host-error", message=str(e), bytes=total)
        finally:
            conn.close()

    while True:
        conn, _peer = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def _connect(ztx, service: str):
    from openziti import zitilib  # noqa: PLC0415

    fd = zitilib.ziti_socket(socket.SOCK_STREAM)
    rc = zitilib._ziti_connect(fd, ztx, service.encode(), None)  # the wrapper cannot pass no terminator
    if rc:
        os.close(fd)
        raise OSError(rc, zitilib.errorstr(zitilib._ziti_lasterr()))
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fd)


def _recv_exactly(sock, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(65536, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def run(ztx, cmd: dict) -> None:
    op, start = cmd["op"], time.monotonic()
    try:
        sock = _connect(ztx, cmd["service"])
    except OSError as e:
        say(event="error", op=op, message=str(e), after=round(time.monotonic() - start, 3))
        return
    try:
        if op in ("echo", "hold"):
            sock.sendall(cmd["line"].encode() + b"\n")
            reply = _read_line(sock).decode()
            say(event="echo", reply=reply, after=round(time.monotonic() - start, 3))
            if op == "hold":
                begin = time.monotonic()
                try:
                    while sock.recv(65536):
                        pass
                except OSError:
                    pass
                say(event="ended", after=round(time.monotonic() - begin, 3))
                return
            sock.shutdown(socket.SHUT_WR)   # FIN: the host reports EOF, then closes its side
            rest = sock.recv(1024)
            say(event="closed", rest=rest.decode())
        elif op == "bulk":
            size = cmd["size"]
            payload = os.urandom(size)
            sock.sendall(b"bulk\n")
            _read_line(sock)
            got: dict = {}

            def reader() -> None:
                data = _recv_exactly(sock, size)
                got["sha"] = hashlib.sha256(data).hexdigest()
                got["n"] = len(data)
            t = threading.Thread(target=reader)
            t.start()
            view = memoryview(payload)
            for i in range(0, size, 32768):
                sock.sendall(view[i:i + 32768])
            t.join(120)
            say(event="bulk", sent=hashlib.sha256(payload).hexdigest(), got=got.get("sha"), n=got.get("n"),
                after=round(time.monotonic() - start, 3))
    except OSError as e:
        say(event="error", op=op, message=str(e), after=round(time.monotonic() - start, 3))
    finally:
        sock.close()


def dial(ztx_path: str) -> None:
    from openziti import zitilib  # noqa: PLC0415

    ztx = zitilib.load(ztx_path)
    say(event="loaded", ok=bool(ztx))
    for line in sys.stdin:
        if line.strip():
            cmd = json.loads(line)
            if cmd.get("background"):
                threading.Thread(target=run, args=(ztx, cmd), daemon=True).start()
            else:
                run(ztx, cmd)


if __name__ == "__main__":
    if sys.argv[1] == "host":
        host(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "host")
    elif sys.argv[1] == "dial":
        dial(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
