"""Host the ``echo`` service with the OpenZiti Python SDK: every line a client sends comes back.

    python examples/echo_host.py echo-host.json
"""

import sys
import threading

import openziti


def serve(conn) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


ztx = openziti.load(sys.argv[1])
server = ztx.bind("echo")
server.listen(8)
print("hosting 'echo' through the overlay; Ctrl-C to stop", flush=True)
while True:
    conn, peer = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
