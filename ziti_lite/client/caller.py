"""The caller's own view on the client API: its edge routers, whether its services changed,
the API's protocols, and short-lived certificates for its API session.

API session certificates are signed by the edge signing CA from the caller's CSR, valid for
12 hours, with the SPIFFE id ``spiffe://<trust domain>/identity/<identity>/apiSession/<api
session>/apiSessionCertificate/<certificate>`` as their only SAN; they go with their API
session. Every operation here sees only the caller's own API session: another session's
certificate is 404.
"""

from __future__ import annotations

import functools

from cryptography import x509

from .. import clock
from ..api import crud
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import op
from ..api.resource import Field, Resource
from ..auth import certs as certauth
from ..db.filters import Symbol
from ..errors import ApiError, NotFound, generic_cause
from ..ids import new_id
from ..pki import ca
from ..pki.csr import CsrError, parse_csr
from ..policy.model import IDENTITY_ROUTERS
from ..resources.common import Body
from ..resources.routers import EDGE_ROUTERS
from ..routing import presence
from . import changes

CLIENT = ("client",)
CERT_HOURS = 12


# ------------------------------------------------------------------ edge routers
@op("GET", "/current-identity/edge-routers", apis=CLIENT, auth="session", op_id="getCurrentIdentityEdgeRouters",
    tag="current-identity", query=("limit", "offset", "filter"))
async def current_identity_edge_routers(ctx: Ctx):
    res = EDGE_ROUTERS
    where, params = "t.is_verified = 1", []
    if not ctx.api_session.is_admin:
        where += f" AND {IDENTITY_ROUTERS}"
        params = [ctx.identity_id]
    def router(ctx: Ctx, r: dict) -> dict:
        live = presence.state(ctx.ctl, r["id"])
        return {
            **env.base(r, "edge-routers", ("edge-router-policies",)),
            "name": r["name"], "hostname": live.get("hostname", ""), "isOnline": bool(live.get("isOnline")),
            "supportedProtocols": live.get("supportedProtocols") or {},
            "syncStatus": live.get("syncStatus", "SYNC_UNKNOWN"),
            "cost": None, "noTraversal": None, "disabled": None,   # upstream leaves these unset here
        }

    return crud.list_response(ctx, res, where, params, render_row=router)


# ------------------------------------------------------------------ service updates, protocols
@op("GET", "/current-api-session/service-updates", apis=CLIENT, auth="session",
    op_id="listServiceUpdates", tag="current-api-session")
async def service_updates(ctx: Ctx):
    return env.ok({"lastChangeAt": changes.last_change_at(ctx)})


@op("GET", "/protocols", apis=CLIENT, auth="public", op_id="listProtocols", tag="informational")
async def protocols(ctx: Ctx):
    s = ctx.ctl.settings
    host = s.public_host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return env.ok({"https": {"address": f"{host}:{s.port}"}})


# ------------------------------------------------------------------ API session certificates
class CertificateCreate(Body):
    csr: str | None = None


API_SESSION_CERTIFICATES = Resource(
    name="current-api-session/certificates", entity="apiSessionCertificate", table="api_session_certificates",
    ops=(),
    fields=(Field("subject"), Field("fingerprint"), Field("validFrom", "datetime"), Field("validTo", "datetime"),
            Field("certificate")),
    filters=("apiSession", "subject", "fingerprint"),
    extra_symbols={"apiSession": Symbol("string", "t.api_session_id")},
)


@functools.lru_cache(maxsize=8)
def trust_domain(root_pem: str) -> str:
    """The SPIFFE trust domain: the root CA's own SPIFFE id if it has one, else one derived
    from its fingerprint."""
    cert = x509.load_pem_x509_certificate(root_pem.encode())
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for uri in sans.get_values_for_type(x509.UniformResourceIdentifier):
            if uri.startswith("spiffe://"):
                return uri[len("spiffe://"):].split("/", 1)[0]
    except x509.ExtensionNotFound:
        pass
    return ca.fingerprint(root_pem)


def _csr_error(message: str) -> ApiError:
    return ApiError("COULD_NOT_PROCESS_CSR", cause=generic_cause(message))


def _render_certificate(ctx: Ctx, row: dict) -> dict:
    return {**env.base(row, "current-api-session/certificates"), "subject": row["subject"],
            "fingerprint": row["fingerprint"],
            "validFrom": row["valid_from"], "validTo": row["valid_to"], "certificate": row["certificate"]}


@op("POST", "/current-api-session/certificates", apis=CLIENT, auth="session",
    op_id="createCurrentApiSessionCertificate", body=CertificateCreate, status=201, tag="current-api-session")
async def create_certificate(ctx: Ctx):
    body = await ctx.json(CertificateCreate)
    if not body.csr or not body.csr.strip():
        raise _csr_error("a CSR is required")
    try:
        csr = parse_csr(body.csr)
    except CsrError as e:
        raise _csr_error(str(e)) from None
    state, sess = ctx.ctl.state, ctx.api_session
    cert_id = new_id()
    spiffe = (f"spiffe://{trust_domain(state['root_cert'])}/identity/{sess.identity_id}"
              f"/apiSession/{sess.id}/apiSessionCertificate/{cert_id}")
    now = clock.now()
    leaf = ca.sign_csr(csr, ca.KeyPair(state["signer_cert"], state["signer_key"]), days=CERT_HOURS / 24,
                       sans=[x509.UniformResourceIdentifier(spiffe)], now=now)
    info = ca.cert_info(leaf)
    chain = certauth.chain_pem(ctx.ctl, leaf)
    stamp = clock.fmt(now)
    with ctx.store.write():
        ctx.store.execute(
            "INSERT INTO api_session_certificates (id, created_at, updated_at, api_session_id, identity_id, subject,"
            " fingerprint, valid_from, valid_to, certificate) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (cert_id, stamp, stamp, sess.id, sess.identity_id, info["subject"], info["fingerprint"],
             clock.fmt(info["not_before"]), clock.fmt(info["not_after"]), chain))
        crud.changed(ctx, API_SESSION_CERTIFICATES, cert_id, None, {"api_session_id": sess.id})
    return env.ok({"id": cert_id, "_links": {"self": {"href": f"./current-api-session/certificates/{cert_id}"}},
                   "certificate": chain, "cas": certauth.ca_bundle_pem(ctx.ctl)}, status=201)


@op("GET", "/current-api-session/certificates", apis=CLIENT, auth="session",
    op_id="listCurrentApiSessionCertificates", tag="current-api-session", query=("limit", "offset", "filter"))
async def list_certificates(ctx: Ctx):
    return crud.list_response(ctx, API_SESSION_CERTIFICATES, "t.api_session_id = ?", [ctx.api_session.id],
                              render_row=_render_certificate)


def _own_certificate(ctx: Ctx) -> dict:
    id = ctx.params["id"]
    row = ctx.store.one("SELECT * FROM api_session_certificates WHERE id = ? AND api_session_id = ?",
                        (id, ctx.api_session.id))
    if row is None:
        raise NotFound("apiSessionCertificate", id)
    return row


@op("GET", "/current-api-session/certificates/{id}", apis=CLIENT, auth="session",
    op_id="detailCurrentApiSessionCertificate", tag="current-api-session")
async def detail_certificate(ctx: Ctx):
    return env.ok(_render_certificate(ctx, _own_certificate(ctx)))


@op("DELETE", "/current-api-session/certificates/{id}", apis=CLIENT, auth="session",
    op_id="deleteCurrentApiSessionCertificate", tag="current-api-session")
async def delete_certificate(ctx: Ctx):
    with ctx.store.write():
        row = _own_certificate(ctx)
        ctx.store.execute("DELETE FROM api_session_certificates WHERE id = ?", (row["id"],))
        crud.changed(ctx, API_SESSION_CERTIFICATES, row["id"], row, None)
    return env.empty()

