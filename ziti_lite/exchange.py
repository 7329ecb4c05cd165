"""Moving a network in and out: ``ziti-lite export`` / ``ziti-lite import`` in the format of
``ziti ops export`` / ``ziti ops import`` (OpenZiti 1.3.x, ``ziti/cmd/ascode``).

The document has one list per entity type (``certificateAuthorities``, ``identities``,
``edgeRouters``, ``services``, ``configs``, ``configTypes``, ``servicePolicies``,
``edgeRouterPolicies``, ``serviceEdgeRouterPolicies``, ``externalJwtSigners``, ``authPolicies``,
``postureChecks``); each entity is its management-API detail without ids, links and times, and
every reference is by name: ``"@<name>"`` in roles, ``configs``, ``configType``, ``authPolicy``,
``allowedSigners`` and ``requireExtJwtSigner``. As upstream, the export leaves out what every
network already has (the default admin, router identities, the ``Default`` auth policy, the
five built-in config types) and the import creates what is missing by name and skips what
exists, in upstream's order.

Both run in-process on a database file (through the same API handlers a client calls, as the
default admin), so they work on a stopped controller as well as beside a running one.

What cannot move is named in the output: private keys and issued certificates (identities
arrive without authenticators or enrollments: enroll them again; routers must re-enroll), CA
verification (imported CAs must be verified again), API sessions, sessions and terminators.
One difference from upstream's exporter: posture-check roles of service policies are exported
(upstream 1.3.3 writes an empty list there).

The export of OpenZiti 2.0's CLI (``ziti ops export`` v2.0) also lists the identities every
network has of its own: each edge router's (``typeId`` ``Router``, named as its router) and the
default admin (``isDefaultAdmin``). As 2.0's ``ziti ops import``, the import never creates them:
after the edge routers it looks each up by name and, where it exists, sets its role attributes
from the document (``updated``); one that does not exist (the router is in neither the file
nor the network, or the other network's default admin has another name) is skipped and said.
A document with them goes through ``apply`` alike (``system_identity``). A tunneler-enabled
router's own edge router policy (``edge-router-<id>-system``), which upstream's export writes as
any policy, is neither exported nor created: it comes with its router (``system_policy``).

``import`` reads JSON; ``ziti-lite apply`` (``netcode/``) reads the same documents as JSON or
YAML and also updates and prunes, through ``to_body`` and ``ApiBase`` here.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from . import permissions, wiring
from .app import create_app
from .auth import sessions
from .config import Settings

# the order of upstream's importer: what a later type refers to exists first
IMPORT_ORDER = ("certificateAuthorities", "externalJwtSigners", "authPolicies", "identities", "configTypes",
                "configs", "services", "postureChecks", "edgeRouters", "serviceEdgeRouterPolicies",
                "servicePolicies", "edgeRouterPolicies")
COLLECTION = {"certificateAuthorities": "cas", "externalJwtSigners": "external-jwt-signers",
              "authPolicies": "auth-policies", "identities": "identities", "configTypes": "config-types",
              "configs": "configs", "services": "services", "postureChecks": "posture-checks",
              "edgeRouters": "edge-routers", "serviceEdgeRouterPolicies": "service-edge-router-policies",
              "servicePolicies": "service-policies", "edgeRouterPolicies": "edge-router-policies"}
# the kinds whose entities a kind's entities name (references and roles): an export, a plan or a
# rehearsal of some kinds reads these too (``needed``), so a least-privilege identity reads only them
NAMES = {
    "identities": ("authPolicies",),
    "authPolicies": ("externalJwtSigners",),
    "externalJwtSigners": ("authPolicies",),   # the policy of the identities it enrolls (OpenZiti 2.0)
    "configs": ("configTypes",),
    "services": ("configs",),
    "servicePolicies": ("identities", "services", "postureChecks"),
    "edgeRouterPolicies": ("identities", "edgeRouters"),
    "serviceEdgeRouterPolicies": ("services", "edgeRouters"),
}
BUILTIN_CONFIG_TYPES = ("intercept.v1", "host.v1", "host.v2", "ziti-tunneler-server.v1", "ziti-tunneler-client.v1")
BASE = ("id", "_links", "createdAt", "updatedAt")
DROP = {
    "certificateAuthorities": BASE,
    "identities": BASE + ("defaultHostingCost", "defaultHostingPrecedence", "hasApiSession",
                          "serviceHostingPrecedences", "enrollment", "appData", "sdkInfo", "disabledAt",
                          "disabledUntil", "serviceHostingCosts", "envInfo", "authenticators", "type",
                          "authPolicyId", "hasRouterConnection", "hasEdgeRouterConnection",
                          "interfaces"),   # OpenZiti 2.0: what a router reported, not a setting
    # + enrollmentToken, which upstream's exporter writes out: a credential, and it cannot move
    "edgeRouters": BASE + ("cost", "fingerprint", "isVerified", "isOnline", "enrollmentJwt", "enrollmentCreatedAt",
                           "enrollmentExpiresAt", "syncStatus", "versionInfo", "certPem", "supportedProtocols",
                           "enrollmentToken", "interfaces", "configs"),   # 2.0: reported; always null
    "services": BASE + ("configs", "config", "data", "postureQueries", "permissions", "maxIdleTimeMillis"),
    "configs": BASE + ("configType", "configTypeId"),
    "configTypes": BASE,
    "servicePolicies": BASE + ("serviceRolesDisplay", "identityRolesDisplay", "postureCheckRolesDisplay", "isSystem"),
    "edgeRouterPolicies": BASE + ("edgeRouterRolesDisplay", "identityRolesDisplay", "isSystem"),
    "serviceEdgeRouterPolicies": BASE + ("edgeRouterRolesDisplay", "serviceRolesDisplay", "isSystem"),
    "externalJwtSigners": BASE + ("notBefore", "notAfter", "commonName"),
    "authPolicies": BASE,
    "postureChecks": BASE + ("version",),
}
# policy role fields -> the collection their @-references name
ROLES = {
    "servicePolicies": {"identityRoles": "identities", "serviceRoles": "services",
                        "postureCheckRoles": "posture-checks"},
    "edgeRouterPolicies": {"identityRoles": "identities", "edgeRouterRoles": "edge-routers"},
    "serviceEdgeRouterPolicies": {"serviceRoles": "services", "edgeRouterRoles": "edge-routers"},
}
CANNOT_MOVE = ("not moved (they cannot be): private keys and issued certificates - identities arrive without "
               "authenticators or enrollments and must be enrolled again, edge routers must re-enroll; "
               "CA verification - imported CAs must be verified again; API sessions, sessions and terminators; "
               "the default admin, router identities, the Default auth policy and the built-in config types, "
               "which every network has")


class ExchangeError(Exception):
    pass


def system_identities(api: ApiBase) -> dict[str, dict]:
    """name -> detail of the network's router identities and default admin (what an export
    leaves out and a 2.0 export lists)."""
    return {e["name"]: e for e in api.list("identities", 'type = "Router" or isDefaultAdmin = true')}


def system_policy(kind: str, entity: dict) -> bool:
    """A tunneler-enabled router's own edge router policy (``edge-router-<id>-system``, the
    router on both sides), which comes with its router: the API marks it ``isSystem``, an
    export (upstream's writes them) by its name and roles. Never exported, created or pruned."""
    if kind != "edgeRouterPolicies":
        return False
    if entity.get("isSystem") is True:
        return True
    name, roles = entity.get("name") or "", entity.get("identityRoles")
    return (name.startswith("edge-router-") and name.endswith("-system") and isinstance(roles, list)
            and len(roles) == 1 and roles == entity.get("edgeRouterRoles"))


def system_identity(entity: dict) -> bool:
    """An identity of a 2.0 export that every network has of its own: a router's or the
    default admin (``ziti ops export`` v2.0 writes them; v1.3.3's and ziti-lite's leave them out)."""
    return entity.get("typeId") == "Router" or entity.get("type") == "Router" or entity.get("isDefaultAdmin") is True


def needed(kinds) -> tuple[str, ...]:
    """``kinds`` and every kind their entities may name, transitively, in import order."""
    out: set[str] = set()
    todo = list(kinds)
    while todo:
        kind = todo.pop()
        if kind not in out:
            out.add(kind)
            todo.extend(NAMES.get(kind, ()))
    return tuple(k for k in IMPORT_ORDER if k in out)


def refused(collection: str, action: str) -> str:
    """What a 401 on ``collection`` means for a caller that is no admin: the permissions that
    would allow ``action`` there (OpenZiti 2.0's; a controller before 2.0 wants an admin)."""
    entity = wiring.resource(collection).permission
    granting = permissions.granting((entity, action) if entity else None)
    allowed = f"one of the permissions {', '.join(granting)}" if granting else "an admin"
    return f"{collection}: {action} refused (401): the identity needs {allowed}"


class ApiBase:
    """A management API client: ``call`` one operation; lists and name look-ups over it."""

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raise NotImplementedError

    def list(self, collection: str, filter: str | None = None) -> list[dict]:
        out: list[dict] = []
        offset = 0
        while True:
            q = f"/{collection}?limit=500&offset={offset}"
            if filter:
                q += "&filter=" + urllib.parse.quote(filter)
            status, body = self.call("GET", q)
            if status == 401:
                raise ExchangeError(refused(collection, "read"))
            if status != 200:
                raise ExchangeError(f"listing {collection} failed: {status} {body}")
            out.extend(body["data"])
            offset += 500
            if offset >= body["meta"]["pagination"]["totalCount"]:
                return out

    def by_name(self, collection: str, name: str) -> dict | None:
        rows = self.list(collection, f"name = {json.dumps(name)}")
        return rows[0] if rows else None

    def close(self) -> None:
        pass


async def asgi_request(app, method: str, path: str, token: str | None, body: bytes = b"") -> tuple[int, bytes]:
    """One request straight into the ASGI app, as a client on loopback would send it (``path``
    with its query): its status and body. For callers in this process that need no HTTP stack."""
    path, _, query = path.partition("?")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if token:
        headers.append((b"zt-session", token.encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "https", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": query.encode(), "server": ("127.0.0.1", 1280), "client": ("127.0.0.1", 1),
             "headers": headers}
    sent, status, chunks = False, 0, []

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


class LocalApi(ApiBase):
    """The management API of a database file, called in-process as its default admin."""

    def __init__(self, db: str):
        self.app = create_app(Settings(db=db, edge_port=0))
        self.ctl = self.app.state.controller
        store = self.ctl.store
        admin = store.one("SELECT i.id AS identity_id, a.id AS authenticator_id FROM identities i"
                          " JOIN authenticators a ON a.identity_id = i.id WHERE i.is_admin = 1"
                          " ORDER BY i.is_default_admin DESC LIMIT 1")
        if admin is None:
            raise ExchangeError("the database has no admin identity with an authenticator")
        self.session = sessions.create(self.ctl, admin["identity_id"], admin["authenticator_id"], "127.0.0.1", [])
        self.loop = asyncio.new_event_loop()

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode() if body is not None else b""
        status, raw = self.loop.run_until_complete(
            asgi_request(self.app, method, "/edge/management/v1" + path, self.session["token"], payload))
        return status, (json.loads(raw) if raw else None)

    def close(self) -> None:
        with self.ctl.store.write():
            self.ctl.store.execute("DELETE FROM api_sessions WHERE id = ?", (self.session["id"],))
        self.loop.close()
        self.ctl.store.close()


# ---------------------------------------------------------------- export
def role_attributes(m: dict) -> dict:
    """``roleAttributes`` as a list, also where the API shows none (null)."""
    if m.get("roleAttributes") is None:
        m["roleAttributes"] = []
    return m


def _roles_by_name(kind: str, m: dict) -> dict:
    """A policy's role lists as the names its ``…Display`` fields give."""
    e = dict(m)
    for field in ROLES[kind]:
        e[field] = [r["name"] for r in m.get(field + "Display") or []]
    return e


def _signers_by_name(e: dict, name_of) -> dict:
    """An auth policy's external JWT signers as ``@name`` references."""
    ext = e.get("primary", {}).get("extJwt", {})
    ext["allowedSigners"] = ["@" + name_of("external-jwt-signers", s) for s in ext.get("allowedSigners") or []]
    secondary = e.get("secondary") or {}
    if secondary.get("requireExtJwtSigner"):
        secondary["requireExtJwtSigner"] = "@" + name_of("external-jwt-signers", secondary["requireExtJwtSigner"])
    return e


def export(api: ApiBase, kinds=None) -> dict[str, list[dict]]:
    """The network as a document; of ``kinds`` only (default: every kind), so that a caller that
    may read only some collections exports those."""
    names: dict[tuple[str, str], str] = {}
    wanted = set(IMPORT_ORDER if kinds is None else kinds)

    def name_of(collection: str, id: str) -> str:
        key = (collection, id)
        if key not in names:
            status, body = api.call("GET", f"/{collection}/{id}")
            if status == 401:
                raise ExchangeError(refused(collection, "read"))
            if status != 200:
                raise ExchangeError(f"{collection}/{id} is referenced but cannot be read ({status})")
            names[key] = body["data"]["name"]
        return names[key]

    def strip(kind: str, m: dict) -> dict:
        # an identity's permissions (OpenZiti 2.0) only where it has some: the document of one
        # without reads as a v1.x controller's export
        return {k: v for k, v in m.items() if k not in DROP[kind] and not (k == "permissions" and not v)}

    out: dict[str, list[dict]] = {}
    if "certificateAuthorities" in wanted:
        out["certificateAuthorities"] = [strip("certificateAuthorities", m) for m in api.list("cas")]

    if "identities" in wanted:
        identities = []
        for m in api.list("identities"):
            if m.get("typeId") == "Router" or m.get("isDefaultAdmin"):
                continue
            e = strip("identities", role_attributes(dict(m)))
            if m.get("disabledUntil") is not None:
                e["disabledUntil"] = m["disabledUntil"]
            e["authPolicy"] = "@" + name_of("auth-policies", m["authPolicyId"])
            identities.append(e)
        out["identities"] = identities

    if "edgeRouters" in wanted:
        out["edgeRouters"] = [strip("edgeRouters", role_attributes(dict(m))) for m in api.list("edge-routers")]

    if "services" in wanted:
        services = []
        for m in api.list("services"):
            e = strip("services", role_attributes(dict(m)))
            e["configs"] = ["@" + name_of("configs", c) for c in m.get("configs") or []] or None
            services.append(e)
        out["services"] = services

    if "configs" in wanted:
        configs = []
        for m in api.list("configs"):
            e = strip("configs", m)
            e["configType"] = "@" + name_of("config-types", m["configTypeId"])
            configs.append(e)
        out["configs"] = configs

    if "configTypes" in wanted:
        out["configTypes"] = [strip("configTypes", m) for m in api.list("config-types")
                              if m["name"] not in BUILTIN_CONFIG_TYPES]

    for kind, collection in (("servicePolicies", "service-policies"), ("edgeRouterPolicies", "edge-router-policies"),
                             ("serviceEdgeRouterPolicies", "service-edge-router-policies")):
        if kind in wanted:
            out[kind] = [strip(kind, _roles_by_name(kind, m)) for m in api.list(collection)
                         if not system_policy(kind, m)]

    if "externalJwtSigners" in wanted:
        out["externalJwtSigners"] = [_enroll_policy_by_name(strip("externalJwtSigners", m), name_of)
                                     for m in api.list("external-jwt-signers")]

    if "authPolicies" in wanted:
        out["authPolicies"] = [_signers_by_name(strip("authPolicies", json.loads(json.dumps(m))), name_of)
                               for m in api.list("auth-policies") if m["name"] != "Default"]

    if "postureChecks" in wanted:
        out["postureChecks"] = [strip("postureChecks", m) for m in api.list("posture-checks")]
    return out


def _enroll_policy_by_name(signer: dict, name_of: Callable[[str, str], str]) -> dict:
    """A signer's ``enrollAuthPolicyId`` as an ``@name`` reference (``default`` is the same id
    on every controller and stays)."""
    policy = signer.get("enrollAuthPolicyId")
    if isinstance(policy, str) and policy and policy != "default":
        signer["enrollAuthPolicyId"] = "@" + name_of("auth-policies", policy)
    return signer


ENROLL_LATER = ("enrollAuthPolicyId", "enrollToCertEnabled", "enrollToTokenEnabled")


def defer_enroll_policy(kind: str, entity: dict) -> dict | None:
    """A signer naming an auth policy by ``@name`` is created before the policies (they name
    signers): its enrollment policy and modes are taken out here and patched in at the end."""
    policy = entity.get("enrollAuthPolicyId") if kind == "externalJwtSigners" else None
    if not (isinstance(policy, str) and policy.startswith("@")):
        return None
    return {k: entity.pop(k) for k in ENROLL_LATER if k in entity}


def dumps(document: dict) -> str:
    """As upstream writes it: two-space indent, keys sorted (Go marshals maps so)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- import
def load(text: str) -> dict[str, list[dict]]:
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ExchangeError(f"not a JSON export ({e}); YAML exports are not read (no YAML library): "
                            "convert them to JSON first") from None
    if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
        raise ExchangeError("not an export: expected an object of entity lists")
    unknown = set(doc) - set(COLLECTION)
    if unknown:
        raise ExchangeError(f"unknown entity types in the export: {', '.join(sorted(unknown))}")
    return doc


def to_body(kind: str, entity: dict, ref: Callable[[str, Any], str], create: bool = True) -> dict:
    """The create (or, ``create=False``, patch) body of an exported entity: its ``@name``
    references turned into ids by ``ref(collection, "@name")``; fields the entity does not have
    stay absent (but a new identity's type, ``Default`` unless given)."""
    body = json.loads(json.dumps(entity))
    if kind == "identities":
        identity_type = body.pop("typeId", None) or body.get("type") or ("Default" if create else None)
        if identity_type:
            body["type"] = identity_type
        if "authPolicy" in body:
            body["authPolicyId"] = ref("auth-policies", body.pop("authPolicy"))
    elif kind == "configs":
        if "configType" in body:
            body["configTypeId"] = ref("config-types", body.pop("configType"))
    elif kind == "services":
        if "configs" in body:
            body["configs"] = [ref("configs", c) for c in body.get("configs") or []]
    elif kind == "authPolicies":
        ext = (body.get("primary") or {}).get("extJwt") or {}
        if "allowedSigners" in ext:
            ext["allowedSigners"] = [ref("external-jwt-signers", s) for s in ext.get("allowedSigners") or []]
        secondary = body.get("secondary") or {}
        if secondary.get("requireExtJwtSigner"):
            secondary["requireExtJwtSigner"] = ref("external-jwt-signers", secondary["requireExtJwtSigner"])
    elif kind == "externalJwtSigners":
        policy = body.get("enrollAuthPolicyId")
        if isinstance(policy, str) and policy.startswith("@"):
            body["enrollAuthPolicyId"] = ref("auth-policies", policy)
    elif kind in ROLES:
        for field, target in ROLES[kind].items():
            if field in body:
                body[field] = [("@" + ref(target, r)) if isinstance(r, str) and r.startswith("@") else r
                               for r in body.get(field) or []]
    return body


def import_(api: ApiBase, doc: dict[str, list[dict]], say: Callable[[str], None] = lambda s: None) -> dict:
    """Create what the document has and the network lacks (by name); returns
    ``{entity type: {"created": n, "skipped": n, "updated": n}}`` (updated: the role attributes
    of a 2.0 export's router identities and default admin)."""
    ids: dict[tuple[str, str], str] = {}

    def ref(collection: str, value: Any, what: str) -> str:
        if not isinstance(value, str) or not value.startswith("@"):
            raise ExchangeError(f"{what}: expected an @name reference, got {value!r}")
        name = value[1:]
        key = (collection, name)
        if key not in ids:
            row = api.by_name(collection, name)
            if row is None:
                raise ExchangeError(f"{what}: no {collection} named {name!r}")
            ids[key] = row["id"]
        return ids[key]

    counts: dict[str, dict[str, int]] = {}
    later: list[tuple[str, str, dict]] = []   # signers whose enrollment auth policy comes after them
    for kind in IMPORT_ORDER:
        collection = COLLECTION[kind]
        done = counts[kind] = {"created": 0, "skipped": 0, "updated": 0}
        for entity in doc.get(kind) or []:
            if not isinstance(entity, dict) or not isinstance(entity.get("name"), str):
                raise ExchangeError(f"{kind}: every entity needs a name")
            name = entity["name"]
            if kind == "identities" and system_identity(entity):
                continue   # after the edge routers (theirs come with them), as 2.0's importer
            if system_policy(kind, entity):
                done["skipped"] += 1   # a router's own: it comes with its router (tunneler-enabled)
                continue
            existing = api.by_name(collection, name)
            if existing is not None:
                if kind == "identities" and system_identity(existing):
                    _set_attributes(api, existing, entity, done, say)   # 2.0's importer: by the existing one
                else:
                    done["skipped"] += 1
                continue
            what = f"{kind} {name!r}"
            entity = json.loads(json.dumps(entity))
            deferred = defer_enroll_policy(kind, entity)
            body = to_body(kind, entity, lambda collection, value: ref(collection, value, what))
            status, reply = api.call("POST", f"/{collection}", body)
            _check(status, reply, 201, f"creating {what}")
            ids[(collection, name)] = reply["data"]["id"]
            if deferred is not None:
                later.append((reply["data"]["id"], what, deferred))
            done["created"] += 1
            say(f"created {kind}: {name}")
    for id, what, deferred in later:
        body = to_body("externalJwtSigners", deferred, lambda collection, value: ref(collection, value, what))
        status, reply = api.call("PATCH", f"/external-jwt-signers/{id}", body)
        _check(status, reply, 200, f"setting the enrollment auth policy of {what}")
    _system_identities(api, doc, counts["identities"], say)
    return counts


def _check(status: int, reply: Any, want: int, doing: str) -> None:
    if status != want:
        cause = (reply or {}).get("error", {})
        detail = cause.get("cause") or cause.get("message")
        raise ExchangeError(f"{doing} failed: {status} {cause.get('code')}: {detail}")


def _system_identities(api: ApiBase, doc: dict, done: dict[str, int], say: Callable[[str], None]) -> None:
    """The router identities and the default admin of a 2.0 export: matched by name, their role
    attributes set; never created (a router's comes with its router; upstream's importer would
    create another network's default admin of another name as an admin without credentials)."""
    for entity in doc.get("identities") or []:
        if not system_identity(entity):
            continue
        row = api.by_name("identities", entity["name"])
        if row is None:
            whose = "the default admin" if entity.get("isDefaultAdmin") is True else "a router's identity"
            say(f"skipped identities: {entity['name']} ({whose}, which this network does not have)")
            done["skipped"] += 1
        else:
            _set_attributes(api, row, entity, done, say)


def _set_attributes(api: ApiBase, row: dict, entity: dict, done: dict[str, int], say: Callable[[str], None]) -> None:
    """A router's identity or the default admin found by name: the document's role attributes
    set on it (the only thing 2.0's importer changes of an existing identity)."""
    attributes = entity.get("roleAttributes") or []
    if sorted(set(attributes)) == sorted(set(row.get("roleAttributes") or [])):
        done["skipped"] += 1
        return
    status, reply = api.call("PATCH", f"/identities/{row['id']}", {"roleAttributes": attributes})
    if status != 200:
        cause = (reply or {}).get("error", {})
        raise ExchangeError(f"updating identities {entity['name']!r} failed: {status} {cause.get('code')}: "
                            f"{cause.get('cause') or cause.get('message')}")
    done["updated"] += 1
    say(f"updated identities: {entity['name']} (role attributes)")
