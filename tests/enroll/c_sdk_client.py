"""Runs the OpenZiti C SDK (libziti from the ``openziti`` wheel) in its own process, one step
per invocation, printing one JSON line per event; ``tests/enroll/test_c_sdk.py`` drives it.

    python c_sdk_client.py enroll JWT_FILE OUT_JSON [KEY_PEM_FILE CERT_PEM_FILE]
                                      -> {"event": "enrolled"} | {"event": "error", ...}
    python c_sdk_client.py dial IDENTITY_JSON SERVICE   -> {"event": "loaded"}, then {"event": "dial", "rc": N, ...}

The SDK's own threads and global state stay out of the pytest process."""

from __future__ import annotations

import json
import socket
import sys


def say(**event) -> None:
    print(json.dumps(event), flush=True)


def main(argv: list[str]) -> int:
    from openziti import zitilib  # noqa: PLC0415 - imported only in this subprocess

    step = argv[1]
    if step == "enroll":
        key = cert = None
        if len(argv) > 4:  # enrolling with an external CA's certificate: the SDK takes file paths
            key, cert = argv[4].encode(), argv[5].encode()
        try:
            identity = zitilib.enroll(argv[2], key, cert)
        except Exception as exc:  # the SDK reports refusals as RuntimeError(message)
            say(event="error", message=str(exc))
            return 1
        with open(argv[3], "w") as f:
            f.write(identity)
        say(event="enrolled", ztAPI=json.loads(identity)["ztAPI"])
        return 0
    if step == "dial":
        ztx = zitilib.load(argv[2])  # returns once logged in and the services are loaded
        say(event="loaded", ok=bool(ztx))
        fd = zitilib.ziti_socket(socket.SOCK_STREAM)
        rc = zitilib._ziti_connect(fd, ztx, argv[3].encode(), None)  # the wrapper cannot pass no terminator
        say(event="dial", rc=rc, error=zitilib.errorstr(zitilib._ziti_lasterr()) if rc else "")
        return 0
    raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
