"""Dial the ``echo`` service through ziti-lite's embedded edge router and print the answer.

    python examples/echo_client.py echo-client.json "hello, overlay"
"""

import socket
import sys

from openziti import zitilib


def dial(ztx, service: str) -> socket.socket:
    # openziti 0.6.0's ZitiContext.connect() fails without a terminator name; call the C SDK directly
    fd = zitilib.ziti_socket(socket.SOCK_STREAM)
    if zitilib._ziti_connect(fd, ztx, service.encode(), None):
        raise OSError(zitilib.errorstr(zitilib._ziti_lasterr()))
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fd)


if __name__ == "__main__":
    ztx = zitilib.load(sys.argv[1])
    message = (sys.argv[2] if len(sys.argv) > 2 else "hello, overlay").encode()
    with dial(ztx, "echo") as sock:
        sock.sendall(message)
        reply = b""
        while len(reply) < len(message):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    print(reply.decode())
