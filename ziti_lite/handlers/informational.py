"""Public informational operations: version, capabilities, specs, CA bundle, network JWTs; and
the admin summary."""

from __future__ import annotations

import functools
import platform

from starlette.responses import Response

from .. import UPSTREAM_VERSION, __version__
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import BOTH, op
from ..auth import service_tokens
from ..auth.enrollments import network_jwt
from ..errors import NotFound
from ..pki import ca
from . import spec
from .common import HandlersController

BUILD_DATE = "2026-11-22T00:00:00Z"
REVISION = f"ziti-lite-{__version__}"
ZERO_TIME = "0001-01-01T00:00:00.000Z"


def oidc_advertised(ctl: HandlersController) -> bool:
    """OIDC_AUTH only where it works on every router of the network. A real router validates
    OIDC access tokens with the keys of the router data model, which ziti-lite streams to v2.0
    routers only (v1.x routers keep the legacy sync): so while an enrolled real router has not
    said since start that it is of v2.0 or later, SDKs that would prefer OIDC keep legacy
    sessions, which every router takes."""
    if ctl.oidc is None:
        return False
    return all(service_tokens.major(line) >= 2 for line in service_tokens.real_router_lines(ctl))




def version_doc(ctl: HandlersController, oidc: bool = False) -> dict:
    base = ctl.settings.base_url
    client = {"v1": {"apiBaseUrls": [base + "/edge/client/v1"], "path": "/edge/client/v1"}}
    return {
        # the controller version whose API this is; ziti-lite's own where upstream puts build details
        "version": f"v{UPSTREAM_VERSION}",
        "revision": REVISION,
        "buildDate": BUILD_DATE,
        "runtimeVersion": f"ziti-lite {__version__} (Python {platform.python_version()})",
        # OIDC_AUTH: the /oidc provider, bearer tokens on the APIs and in the router's hello
        "capabilities": ["OIDC_AUTH"] if oidc else [],
        "apiVersions": {
            "edge": client,
            "edge-client": client,
            "edge-management": {"v1": {"apiBaseUrls": [base + "/edge/management/v1"], "path": "/edge/management/v1"}},
            # OpenZiti 2.0 lists these too: clients of 2.0 (ZAC 4.5) find the OIDC provider by
            # edge-oidc, and log in the old way when it is missing; fabric's base URL carries no
            # path there (upstream's binding has none), kept so for clients that add the path
            **({"edge-oidc": {"v1": {"apiBaseUrls": [base + "/oidc"], "path": "/oidc"}}} if oidc else {}),
            "fabric": {"v1": {"apiBaseUrls": [base], "path": "/fabric/v1"}},
            "health-checks": {"v1": {"apiBaseUrls": [], "path": "/health-checks/v1"}},
        },
    }


@functools.lru_cache(maxsize=8)
def _version_body(ctl: HandlersController, oidc: bool) -> bytes:
    return env.encode({"data": version_doc(ctl, oidc), "meta": {}})


@op("GET", "/", apis=BOTH, auth="public", op_id="listRoot", tag="informational")
async def root(ctx: Ctx):
    return env.JSON(_version_body(ctx.ctl, oidc_advertised(ctx.ctl)))


@op("GET", "/version", apis=BOTH, auth="public", op_id="listVersion", tag="informational")
async def version(ctx: Ctx):
    return env.JSON(_version_body(ctx.ctl, oidc_advertised(ctx.ctl)))


@op(
    "GET", "/enumerated-capabilities", apis=BOTH, auth="public", op_id="listEnumeratedCapabilities", tag="informational"
)
async def capabilities(ctx: Ctx):
    return env.ok(["OIDC_AUTH", "HA_CONTROLLER"])


def _spec_item(id: str) -> dict:
    return {**env.base({"id": id, "created_at": ZERO_TIME, "updated_at": ZERO_TIME}, "specs", ("spec",)), "name": id}


SPEC_IDS = {"edge-client": "client", "edge-management": "management"}


@op("GET", "/specs", apis=BOTH, auth="public", op_id="listSpecs", tag="informational")
async def list_specs(ctx: Ctx):
    return env.ok([_spec_item("edge-client")])  # upstream lists only the client spec, on both APIs


@op("GET", "/specs/{id}", apis=BOTH, auth="public", op_id="detailSpec", tag="informational")
async def detail_spec(ctx: Ctx):
    id = ctx.params["id"]
    if id not in SPEC_IDS:
        raise NotFound("spec", id)
    return env.ok(_spec_item(id))


@op("GET", "/specs/{id}/spec", apis=BOTH, auth="public", op_id="detailSpecBody", tag="informational")
async def spec_body(ctx: Ctx):
    id = ctx.params["id"]
    if id not in SPEC_IDS:
        raise NotFound("spec", id)
    if "yaml" in (ctx.request.headers.get("accept") or ""):   # text/yaml, application/x-yaml
        return Response(spec.document_yaml(ctx.ctl, SPEC_IDS[id]), media_type="text/yaml")
    return env.JSON(spec.document_bytes(ctx.ctl, SPEC_IDS[id]))


@op("GET", "/.well-known/est/cacerts", apis=BOTH, auth="public", op_id="listWellKnownCas", tag="well-known")
async def cacerts(ctx: Ctx):
    body = ca.cacerts_pkcs7([ctx.ctl.state["signer_cert"], ctx.ctl.state["root_cert"]])
    return Response(body, media_type="application/pkcs7-mime", headers={"content-transfer-encoding": "base64"})


@op("GET", "/network-jwts", apis=BOTH, auth="public", op_id="listNetworkJWTs", tag="informational")
async def network_jwts(ctx: Ctx):
    return env.ok([{"name": "default", "token": network_jwt(ctx.ctl)}])


SUMMARY_TABLES = {
    "apiSessionCertificates": "api_session_certificates",
    "apiSessions": "api_sessions",
    "authPolicies": "auth_policies",
    "authenticators": "authenticators",
    "cas": "cas",
    "configTypes": "config_types",
    "configs": "configs",
    "controllers": "controllers",   # ziti-lite itself (bootstrap._list_self), as upstream counts its one
    "edgeRouterPolicies": "edge_router_policies",
    "enrollments": "enrollments",
    "eventualEvents": None,
    "externalJwtSigners": "external_jwt_signers",
    "identities": "identities",
    "identityTypes": "identity_types",
    "mfas": "mfa",
    "postureCheckTypes": "posture_check_types",
    "postureChecks": "posture_checks",
    "revocations": "revocations",
    "routers": "routers",
    "routers.edge": "routers WHERE is_edge = 1",
    "serviceEdgeRouterPolicies": "service_edge_router_policies",
    "servicePolicies": "service_policies",
    "services": "services",
    "services.edge": "services",
    "sessions": "sessions",
    "terminators": "terminators",
}


@op("GET", "/summary", op_id="listSummary", tag="informational")
async def summary(ctx: Ctx):
    store = ctx.store
    data = {}
    for key, table in SUMMARY_TABLES.items():
        data[key] = 0 if table is None else store.value(f"SELECT count(*) FROM {table}")
    return env.JSON({"data": data, "meta": None})
