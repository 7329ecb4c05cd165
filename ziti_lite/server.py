"""Running the controller under uvicorn with real TLS on the API port.

The TLS context is built here from the PEMs stored in the database: TLS 1.2+, the RSA server
certificate with its chain, and a client certificate requested but not required. Client
certificates are checked by OpenSSL against the controller's CA bundle (plus verified external
CAs, see ``tls.py``); the handlers read the verified peer certificate through ``tls.py``.
"""

from __future__ import annotations

import os
import ssl
import tempfile

import uvicorn

from .app import create_app
from .config import Settings


def ssl_context(state: dict, extra_cas: list[str] | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="ziti-lite-") as d:
        os.chmod(d, 0o700)
        cert = os.path.join(d, "server.pem")
        key = os.path.join(d, "server.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(state["server_key"])
        with open(cert, "w") as f:
            f.write(state["server_cert"] + state["signer_cert"])
        ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(cadata=state["signer_cert"] + state["root_cert"] + "".join(extra_cas or []))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    # validity dates are the auth policy's business (allowExpiredCerts), not the handshake's
    ctx.verify_flags |= 0x200000  # X509_V_FLAG_NO_CHECK_TIME
    return ctx


def serve(settings: Settings, workers: int = 1, log_level: str = "info") -> None:
    app = create_app(settings)
    ctl = app.state.controller
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                            lifespan="on", server_header=False, date_header=True, access_log=False)
    config.load()
    config.ssl = ssl_context(ctl.state, _external_cas(ctl))
    ctl.ssl_context = config.ssl
    print(f"ziti-lite: serving the OpenZiti edge APIs on {settings.base_url} (db {settings.db})", flush=True)
    uvicorn.Server(config).run()


def _external_cas(ctl) -> list[str]:
    store = ctl.store
    if not store.value("SELECT 1 FROM sqlite_master WHERE name = 'cas'"):
        return []
    return store.column("SELECT cert_pem FROM cas WHERE is_verified = 1 AND is_auth_enabled = 1")
