"""Settings of one controller process, fixed at start (every field declared: ``slots=True``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Settings:
    db: str
    host: str = "127.0.0.1"
    port: int = 1280
    advertise: str | None = None            # host name clients reach us by (JWT iss, cert SAN)
    admin_user: str = "admin"
    admin_password: str | None = None
    session_timeout: int = 30 * 60          # API session inactivity timeout, seconds
    enrollment_minutes: int = 180           # default lifetime of enrollment tokens
    extra_hosts: list[str] = field(default_factory=list)
    edge_port: int = 0                      # embedded edge router's TLS port; 0 = no router
    router_name: str = "ziti-lite"          # the embedded router's name in the network
    zac: str | None = None                  # a built admin console (ZAC) served at /zac/
    log_format: str = "text"                # "json": JSON lines, access records with request ids
    checkpointer: bool = True               # WAL checkpoints in a worker thread while serving (tests: off)
    # connection hardening (connections.py)
    idle_timeout: float = 5.0               # seconds a connection may take to send a request head
    handshake_timeout: float = 5.0          # seconds a client may take to finish the TLS handshake
    max_connections: int | None = None      # open connections; None: 3/4 of the descriptor limit
    loop: str = "auto"                      # event loop: "uvloop", "asyncio", "auto" (uvloop when installed)
    # clients of other services
    jwks_ca_file: str | None = None         # CA bundle for ext-jwt signers' JWKS endpoints (auth/extjwt.py)
    totp_issuer: str | None = None          # issuer in TOTP provisioning URLs; None: upstream's (auth/mfa.py)

    @property
    def public_host(self) -> str:
        return self.advertise or ("127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host)

    @property
    def base_url(self) -> str:
        return f"https://{url_host(self.public_host)}:{self.port}"


def url_host(host: str) -> str:
    """A host as it stands in a URL: IPv6 literals in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
