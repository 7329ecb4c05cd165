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
    server_cert_days: int = 365             # validity of the TLS server certificate when (re-)issued
    edge_port: int = 0                      # embedded edge router's TLS port; 0 = no router
    router_name: str = "ziti-lite"          # the embedded router's name in the network
    ctrl_port: int = 0                      # real routers' control channel (TLS); 0 = none (ctrl/)
    ctrl_heartbeat_timeout: float = 30.0    # seconds a router may leave our heartbeats unanswered
    oidc: bool = True                       # serve the OIDC provider under /oidc (the oauth2 scheme)
    oidc_access_seconds: int = 30 * 60      # OIDC access token life (upstream's default)
    # redirect and post-logout URIs (or path.Match patterns) the OIDC provider allows beyond its
    # loopback defaults: a console served from another origin (oidc/common.py)
    oidc_redirect_uri: list[str] = field(default_factory=list)
    oidc_post_logout_uri: list[str] = field(default_factory=list)
    zac: str | None = None                  # a built admin console (ZAC) served at /zac/
    log_format: str = "text"                # "json": JSON lines, access records with request ids
    checkpointer: bool = True               # WAL checkpoints in a worker thread while serving (tests: off)
    # timed snapshots (backup/schedule.py)
    snapshot_every: float | None = None     # seconds between two snapshots; None: no timed snapshots
    snapshot_dir: str | None = None         # their folder; None: "snapshots" beside the database
    snapshot_keep: int = 24                 # snapshots kept; the oldest beyond are removed
    # connection hardening (connections.py)
    idle_timeout: float = 5.0               # seconds a connection may take to send a request head
    handshake_timeout: float = 5.0          # seconds a client may take to finish the TLS handshake
    max_connections: int | None = None      # open connections; None: 3/4 of the descriptor limit
    # events and audit (ziti_lite/events/)
    events: str | None = None               # JSON-lines file of events ("-": stdout); None: no file
    events_types: list[str] | None = None   # namespaces written to it; None: all
    events_max_mb: float = 10.0             # rotate the file past this size
    events_keep: int = 5                    # rotated files kept
    events_queue: int = 10_000              # events held in memory for the file before new ones are dropped
    events_counts_interval: float = 300.0   # seconds between edge.entityCounts events (upstream: 5m)
    audit_days: float = 90.0                # audit rows older than this are deleted; 0: no audit trail
    audit_max_rows: int = 1_000_000         # and the oldest beyond this many
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
