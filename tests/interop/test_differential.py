"""The same scripted requests against ziti-lite and the real OpenZiti controller v1.3.3, compared.

Each step of ``SCRIPT`` goes to both (ids a step creates are saved under a name on each side and
put into later paths and bodies). What legitimately differs is left out: ids, times, tokens,
certificates, hosts and ports (only field names and JSON types of ``data`` are compared, never
their values) and the entities each controller starts with (lists are compared by content only
where a filter keeps to the script's own entities, all named ``dt-...``). Compared: the status,
``error.code``, the field names and JSON types of ``data`` recursively (null is a type of its
own: ``[]`` against ``null`` is a difference), the values of booleans, numbers and enumerations,
``meta`` (pagination, the filterable fields as a set), and for the script's own lists their names
in order and ``totalCount``.

Every difference found must be listed in ``differences.tsv`` (step pattern, kind, path pattern,
reason), the table the README's "Documented differences" shows; a new difference fails the test,
and so does a listed one that no longer happens (so the table stays true).
"""

from __future__ import annotations

import csv
import datetime
import fnmatch
import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ziti_lite import testing

pytestmark = pytest.mark.interop

TABLE = Path(__file__).with_name("differences.tsv")
# the rows of the table that ``test_permissions_v2.py`` reads (its steps against OpenZiti v2.0.3)
PERM_ROWS = "perm "
V2_ROWS = "v2 "     # rows of tests/interop/test_v2_fields.py's comparison with v2.0.3
V2_DOC_ROWS = "v2-doc "   # differences from v2.0.3 asserted by a test of their own (test_ext_jwt_enroll_v2.py)
MGMT, CLIENT = "/edge/management/v1", "/edge/client/v1"


# ------------------------------------------------------------------ the script
def _ca_pem(cn: str) -> str:
    """A self-signed CA certificate (the same PEM goes to both controllers)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass
class Step:
    name: str
    method: str
    path: str                       # management API unless it starts with "client:"
    body: Any = None
    save: str = ""                  # keep data.id under this name ("name=dotted.path": that value)
    auth: str = "admin"             # admin | none | bad | uuid | user (a non-admin password user)
    raw: bytes | None = None        # a body sent as is
    ctype: str = "application/json"


SCRIPT: list[Step] = []


def s(name: str, method: str, path: str, body: Any = None, **kw) -> None:
    SCRIPT.append(Step(name, method, path, body, **kw))


COLLECTIONS = ("identities", "identity-types", "authenticators", "api-sessions", "config-types", "configs",
               "services", "auth-policies", "external-jwt-signers", "controllers", "cas", "enrollments",
               "edge-routers", "routers", "transit-routers", "terminators", "posture-check-types", "posture-checks",
               "service-policies", "edge-router-policies", "service-edge-router-policies", "sessions")

INTERCEPT = {"protocols": ["tcp"], "addresses": ["dt.ziti"], "portRanges": [{"low": 80, "high": 80}]}
HOST = {"protocol": "tcp", "address": "localhost", "port": 8080}

# --- creation of a small network
s("create config-type", "POST", "/config-types", {"name": "dt-ct", "schema": {"type": "object"}}, save="ct")
s("create config-type no schema", "POST", "/config-types", {"name": "dt-ct-bare"}, save="ct2")
s("find intercept.v1", "GET", '/config-types?filter=name="intercept.v1"')
s("create config", "POST", "/configs", {"name": "dt-cfg", "configTypeId": "g7cIWbcGg", "data": INTERCEPT},
  save="cfg")
s("create config host", "POST", "/configs", {"name": "dt-host", "configTypeId": "NH5p4FpGR", "data": HOST},
  save="cfg2")
s("create service", "POST", "/services", {"name": "dt-svc", "encryptionRequired": True,
                                           "roleAttributes": ["web", "alpha"], "configs": ["{cfg}"]}, save="svc")
s("create bare service", "POST", "/services", {"name": "dt-svc-bare", "encryptionRequired": True}, save="svc2")
s("create identity", "POST", "/identities", {"name": "dt-alice", "type": "User", "isAdmin": False,
                                              "roleAttributes": ["staff"], "enrollment": {"ott": True}},
  save="alice")
s("create bare identity", "POST", "/identities", {"name": "dt-bob", "type": "Device", "isAdmin": False},
  save="bob")
s("create updb identity", "POST", "/identities", {"name": "dt-carol", "type": "User", "isAdmin": False,
                                                   "enrollment": {"updb": "dt-carol"}}, save="carol")
s("create authenticator", "POST", "/authenticators", {"method": "updb", "identityId": "{bob}", "username": "dt-bob",
                                                      "password": "dt-Passw0rd!"}, save="bobauth")
s("create edge router", "POST", "/edge-routers", {"name": "dt-er", "roleAttributes": ["branch"]}, save="er")
s("create bare edge router", "POST", "/edge-routers", {"name": "dt-er-bare"}, save="er2")
s("create transit router", "POST", "/transit-routers", {"name": "dt-tr"}, save="tr")
s("create service policy", "POST", "/service-policies", {
    "name": "dt-sp", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["#staff", "@{bob}"],
    "serviceRoles": ["#web"], "postureCheckRoles": []}, save="sp")
s("create bind policy", "POST", "/service-policies", {
    "name": "dt-sp-bind", "type": "Bind", "semantic": "AllOf", "identityRoles": ["@{bob}"],
    "serviceRoles": ["@{svc}"]}, save="sp2")
s("create edge router policy", "POST", "/edge-router-policies", {
    "name": "dt-erp", "semantic": "AnyOf", "identityRoles": ["#staff"], "edgeRouterRoles": ["#branch"]}, save="erp")
s("create empty edge router policy", "POST", "/edge-router-policies", {"name": "dt-erp-empty", "semantic": "AllOf"},
  save="erp2")
s("create serp", "POST", "/service-edge-router-policies", {
    "name": "dt-serp", "semantic": "AllOf", "serviceRoles": ["#web"], "edgeRouterRoles": ["#all"]}, save="serp")
s("create posture check", "POST", "/posture-checks", {"name": "dt-pc", "typeId": "DOMAIN", "domains": ["corp"],
                                                      "roleAttributes": ["pc"]}, save="pc")
s("create bare posture check", "POST", "/posture-checks", {"name": "dt-pc-os", "typeId": "OS", "operatingSystems": [
    {"type": "Windows", "versions": [">=10.0.19041"]}]}, save="pc2")
s("create mfa check", "POST", "/posture-checks", {"name": "dt-pc-mfa", "typeId": "MFA", "timeoutSeconds": 60},
  save="pc3")


def _auth_policy(name: str, signers: list[str] | None = None, strict: bool = False, **secondary) -> dict:
    """An auth policy's full body: signers allowed (extJwt on) or none, strict or lax passwords."""
    return {"name": name, "primary": {
        "cert": {"allowed": True, "allowExpiredCerts": False},
        "extJwt": {"allowed": signers is not None, "allowedSigners": signers or []},
        "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 3,
                 "minPasswordLength": 8 if strict else 5, "requireMixedCase": strict,
                 "requireNumberChar": strict, "requireSpecialChar": False}},
        "secondary": {"requireTotp": False, **secondary}}


s("create auth policy", "POST", "/auth-policies", _auth_policy("dt-ap", strict=True), save="ap")
s("create jwt signer", "POST", "/external-jwt-signers", {
    "name": "dt-jwt", "enabled": True, "issuer": "https://dt.example", "audience": "dt",
    "jwksEndpoint": "https://dt.example/jwks.json"}, save="jwt")

# --- details of each
for var, coll in (("ct", "config-types"), ("ct2", "config-types"), ("cfg", "configs"), ("svc", "services"),
                  ("svc2", "services"), ("alice", "identities"), ("bob", "identities"), ("carol", "identities"),
                  ("bobauth", "authenticators"), ("er", "edge-routers"), ("er2", "edge-routers"),
                  ("tr", "transit-routers"), ("tr", "routers"), ("sp", "service-policies"),
                  ("sp2", "service-policies"), ("erp", "edge-router-policies"), ("erp2", "edge-router-policies"),
                  ("serp", "service-edge-router-policies"), ("pc", "posture-checks"), ("pc2", "posture-checks"),
                  ("pc3", "posture-checks"), ("ap", "auth-policies"), ("jwt", "external-jwt-signers")):
    s(f"detail {coll} {var}", "GET", f"/{coll}/{{{var}}}")
s("detail identity type", "GET", "/identity-types/User")
s("detail posture check type", "GET", "/posture-check-types/OS")
s("detail auth policy default", "GET", "/auth-policies/default")

# --- every collection's list (shape and meta), then the script's own (content, order, count)
for coll in COLLECTIONS:
    s(f"list {coll}", "GET", f"/{coll}?limit=3")
for coll in ("identities", "config-types", "configs", "services", "auth-policies", "external-jwt-signers",
             "edge-routers", "transit-routers", "posture-checks", "service-policies", "edge-router-policies",
             "service-edge-router-policies"):
    s(f"own {coll}", "GET", f'/{coll}?filter=name contains "dt-" sort by name')
    s(f"own {coll} desc paged", "GET", f'/{coll}?filter=name contains "dt-" sort by name desc&limit=2&offset=1')
s("enrollments of alice", "GET", '/enrollments?filter=identity="{alice}"')
s("authenticators of bob", "GET", '/authenticators?filter=identity="{bob}" and method="updb"')

# --- relationship lists
for var, coll, subs in (
        ("alice", "identities", ("edge-router-policies", "edge-routers", "service-policies", "services",
                                  "authenticators", "enrollments", "service-configs")),
        ("svc", "services", ("service-edge-router-policies", "service-policies", "terminators", "configs",
                             "identities", "edge-routers")),
        ("sp", "service-policies", ("services", "identities", "posture-checks")),
        ("erp", "edge-router-policies", ("edge-routers", "identities")),
        ("serp", "service-edge-router-policies", ("edge-routers", "services")),
        ("er", "edge-routers", ("edge-router-policies", "service-edge-router-policies", "identities", "services")),
        ("cfg", "configs", ("services",)),
        ("ct", "config-types", ("configs",))):
    for sub in subs:
        s(f"related {coll} {sub}", "GET", f"/{coll}/{{{var}}}/{sub}")

# --- filters on upstream's symbols and on others
FILTERS = {
    "identities": ['type = "User"', 'isAdmin = false', 'anyOf(roleAttributes) = "staff"', 'externalId = null',
                   'authPolicyId = "default"', 'isDefaultAdmin = false', 'typeId = "User"', 'disabled = false',
                   'defaultHostingCost = 0'],
    "authenticators": ['method = "updb"', 'updbUsername = "dt-bob"', 'certFingerprint = null',
                       'isIssuedByNetwork = false', 'username = "dt-bob"', 'identityId = "x"'],
    "api-sessions": ['identity != "x"', 'authenticator != "x"', 'ipAddress != "x"', 'identityId = "x"'],
    "config-types": ['schema = null', 'name = "dt-ct"'],
    "configs": ['type = "g7cIWbcGg"', 'configTypeId = "x"'],
    "services": ['terminatorStrategy = "smartrouting"', 'anyOf(configs) = "x"', 'encryptionRequired = true',
                 'maxIdleTimeMillis = 0'],
    "edge-routers": ['isVerified = false', 'isTunnelerEnabled = false', 'cost = 0', 'isOnline = false',
                     'noTraversal = false', 'disabled = false'],
    "terminators": ['sourceCtrl = null', 'binding = "edge"', 'service.name = "x"', 'precedence = "default"'],
    "service-policies": ['type = 1', 'semantic = "AnyOf"', 'anyOf(identityRoles) = "#staff"',
                         'anyOf(postureCheckRoles) = "x"', 'anyOf(identities) = "{alice}"'],
    "edge-router-policies": ['anyOf(edgeRouterRoles) = "#branch"', 'isEmpty(identityRoles)'],
    "posture-checks": ['promptOnWake = false', 'typeId = "OS"', 'anyOf(roleAttributes) = "pc"'],
    "cas": ['isVerified = false', 'anyOf(identityRoles) = "x"', 'identityNameFormat = "x"'],
    "enrollments": ['method = "ott"', 'expiresAt > 2000-01-01T00:00:00Z', 'caId = null'],
    "external-jwt-signers": ['enabled = true', 'externalAuthUrl = null', 'jwksEndpoint = null'],
    "auth-policies": ['primary.updb.maxAttempts = 3', 'primary.updb.lockoutDurationMinutes = 0',
                      'anyOf(primary.extJwt.allowedSigners) = "x"'],
    "sessions": ['type = "Dial"', 'service = "x"', 'identity = "x"', 'service.name = "x"',
                 'apiSession.identity = "x"'],
}
for coll, filters in FILTERS.items():
    for f in filters:
        s(f"filter {coll} {f.split()[0]}", "GET", f"/{coll}?filter={f}")
s("sort unknown field", "GET", "/identities?sort=nothing")
s("filter sort unknown field", "GET", "/identities?filter=true sort by nothing")
s("filter bad syntax", "GET", "/identities?filter=name ==")
s("limit not an int", "GET", "/identities?limit=x")
s("limit none", "GET", '/identities?filter=name contains "dt-" limit none')

# --- bad input of every kind
s("create identity missing type", "POST", "/identities", {"name": "dt-x", "isAdmin": False})
s("create identity wrong type", "POST", "/identities", {"name": "dt-x", "type": "User", "isAdmin": "no"})
s("create identity bad precedence", "POST", "/identities", {"name": "dt-x2", "type": "User", "isAdmin": False,
                                                             "defaultHostingPrecedence": "sometimes"})
s("create identity duplicate", "POST", "/identities", {"name": "dt-alice", "type": "User", "isAdmin": False})
s("create identity bad role", "POST", "/identities", {"name": "dt-x3", "type": "User", "isAdmin": False,
                                                       "roleAttributes": ["#nope"]})
s("create service no name", "POST", "/services", {"encryptionRequired": True})
s("create config bad data", "POST", "/configs", {"name": "dt-bad", "configTypeId": "g7cIWbcGg",
                                                  "data": {"protocols": ["icmp"], "addresses": ["x"],
                                                           "portRanges": [{"low": 1, "high": 2}]}})
s("create config unknown type", "POST", "/configs", {"name": "dt-bad2", "configTypeId": "nope", "data": {}})
s("create config data not an object", "POST", "/configs", {"name": "dt-bad3", "configTypeId": "g7cIWbcGg",
                                                            "data": ["tcp"]})
s("create config data null", "POST", "/configs", {"name": "dt-bad4", "configTypeId": "g7cIWbcGg", "data": None})
s("create config-type schema not an object", "POST", "/config-types", {"name": "dt-ct-bad", "schema": "object"})
s("create service policy bad type", "POST", "/service-policies", {"name": "dt-bad", "type": "Sideways",
                                                                   "semantic": "AnyOf"})
s("create service policy missing ids", "POST", "/service-policies", {
    "name": "dt-bad2", "type": "Dial", "semantic": "AnyOf", "identityRoles": ["@nobody"]})
s("create posture check unknown type", "POST", "/posture-checks", {"name": "dt-bad", "typeId": "NOPE"})
s("create ca bad pem", "POST", "/cas", {"name": "dt-ca", "certPem": "x", "isAutoCaEnrollmentEnabled": True,
                                         "isOttCaEnrollmentEnabled": True, "isAuthEnabled": True,
                                         "identityRoles": []})
s("body not json", "POST", "/services", raw=b"{nope", ctype="application/json")
s("body as text/plain", "POST", "/services", raw=b'{"name":"dt-plain","encryptionRequired":true}',
  ctype="text/plain")
s("body array", "POST", "/services", raw=b"[]", ctype="application/json")
s("detail unknown id", "GET", "/identities/nope")
s("update unknown id", "PUT", "/services/nope", {"name": "dt-x", "encryptionRequired": True})
s("patch unknown id", "PATCH", "/services/nope", {"name": "dt-x"})
s("delete unknown id", "DELETE", "/services/nope")
s("unknown path", "GET", "/nothing-here")
s("no session", "GET", "/identities", auth="none")
s("bad session", "GET", "/identities", auth="bad")
s("unknown uuid session", "GET", "/identities", auth="uuid")
s("delete default admin", "DELETE", "/identities/{admin}")
s("body invalid utf-8", "POST", "/services", raw=b'{"name":"dt-\xff","encryptionRequired":true}', save="badutf")
s("body invalid utf-8 stored, removed", "DELETE", "/services/{badutf}")
s("posture check with Go-cased keys", "POST", "/posture-checks", {
    "name": "dt-pc-go", "typeId": "OS", "operatingSystems": [{"Type": "Windows", "Versions": ["10.0.19041"]}]})
s("body with Go-cased keys", "POST", "/services", {"Name": "dt-svc-go", "EncryptionRequired": True})
s("dangling service config", "POST", "/identities/{alice}/service-configs", [{"serviceId": "{svc}",
                                                                              "configId": "nope"}])
s("non-admin lists identities", "GET", "/identities", auth="user")
s("non-admin failed service requests", "GET", "/identities/{alice}/failed-service-requests", auth="user")
s("non-admin posture data", "GET", "/identities/{alice}/posture-data", auth="user")
s("non-admin current identity", "GET", "client:/current-identity", auth="user")
s("non-admin services", "GET", "client:/services", auth="user")
# OpenZiti 2.0 answers these otherwise (its answers are ziti-lite's: rows of differences.tsv)
s("non-admin lists controllers", "GET", "/controllers", auth="user")
s("non-admin lists sessions", "GET", "/sessions", auth="user")
s("non-admin lists identity types", "GET", "/identity-types", auth="user")
s("non-admin lists posture check types", "GET", "/posture-check-types", auth="user")
s("delete system erp", "DELETE", "/edge-router-policies/{system_erp}")

# --- updates
s("patch identity roles", "PATCH", "/identities/{bob}", {"roleAttributes": ["b", "a"]})
s("detail patched identity", "GET", "/identities/{bob}")
s("put service", "PUT", "/services/{svc2}", {"name": "dt-svc-bare", "encryptionRequired": False})
s("patch service configs empty", "PATCH", "/services/{svc}", {"configs": []})
s("detail emptied service", "GET", "/services/{svc}")
s("patch policy roles", "PATCH", "/service-policies/{sp}", {"identityRoles": ["#z", "#a", "#m"]})
s("detail patched policy", "GET", "/service-policies/{sp}")
s("patch posture check without type", "PATCH", "/posture-checks/{pc}", {"domains": ["other"]})
s("patch posture check with type", "PATCH", "/posture-checks/{pc}", {"typeId": "DOMAIN", "domains": ["other"]})
s("patch config type tags only", "PATCH", "/config-types/{ct}", {"tags": {"a": "b"}})
s("put config type back", "PUT", "/config-types/{ct}", {"name": "dt-ct", "schema": {"type": "object"}})
s("patch auth policy", "PATCH", "/auth-policies/{ap}", {"secondary": {"requireTotp": True}})
s("detail patched auth policy", "GET", "/auth-policies/{ap}")

# --- state transitions and their errors
s("re-enroll edge router", "POST", "/edge-routers/{er}/re-enroll")
s("disable identity", "POST", "/identities/{carol}/disable", {"durationMinutes": 5})
s("enable identity", "POST", "/identities/{carol}/enable")
s("disable unknown identity", "POST", "/identities/nope/disable", {"durationMinutes": 5})
s("policy advice", "GET", "/identities/{alice}/policy-advice/{svc}")
s("policy advice unknown", "GET", "/identities/{alice}/policy-advice/nope")
s("verify ca unknown", "POST", "/cas/nope/verify", raw=b"x", ctype="text/plain")
s("ca jwt unknown", "GET", "/cas/nope/jwt")
s("refresh enrollment unknown", "POST", "/enrollments/nope/refresh", {"expiresAt": "2099-01-01T00:00:00Z"})
s("mfa of admin", "GET", "client:/current-identity/mfa")
s("mfa verify without mfa", "POST", "client:/current-identity/mfa/verify", {"code": "123456"})
s("mfa delete without mfa", "DELETE", "client:/current-identity/mfa")
s("extend cert without cert", "POST", "client:/current-identity/authenticators/{adminauth}/extend",
  {"clientCertCsr": "x"})
s("current api session", "GET", "client:/current-api-session")
s("current identity", "GET", "/current-identity")
s("current identity client", "GET", "client:/current-identity")
s("client services", "GET", "client:/services?limit=2")
s("client own services", "GET", 'client:/services?filter=name contains "dt-" sort by name')
s("client own services by admin", "GET", 'client:/services?filter=name contains "dt-" sort by name&configTypes=all')
s("related services of identity", "GET", '/identities/{bob}/services?filter=name contains "dt-"')
s("client edge routers", "GET", "client:/current-identity/edge-routers")
s("client sessions unknown service", "POST", "client:/sessions", {"serviceId": "nope", "type": "Dial"})
s("authenticate wrong password", "POST", "client:/authenticate?method=password",
  {"username": "admin", "password": "wrong"}, auth="none")
s("authenticate unknown method", "POST", "client:/authenticate?method=nope", {}, auth="none")
s("authenticate without method", "POST", "client:/authenticate", {"username": "admin", "password": "x"}, auth="none")
s("authenticate empty method", "POST", "client:/authenticate?method=", {}, auth="none")
s("authenticate without password", "POST", "client:/authenticate?method=password", {"username": "admin"},
  auth="none")
s("delete api session unknown", "DELETE", "/api-sessions/nope")

# --- issue 34, part 5: the answers a hidden differential saw differ
s("version", "GET", "/version")
s("version client", "GET", "client:/version")
s("summary", "GET", "/summary")
s("create identity of type Router", "POST", "/identities", {"name": "dt-rtr-id", "type": "Router", "isAdmin": False},
  save="rtrid")
s("detail identity of type Router", "GET", "/identities/{rtrid}")
s("patch identity to type Router", "PATCH", "/identities/{rtrid}", {"type": "Router"})
s("detail identity patched to Router", "GET", "/identities/{rtrid}")
s("put identity to type Router", "PUT", "/identities/{rtrid}", {"name": "dt-rtr-id", "type": "Router",
                                                                 "isAdmin": False})
s("detail identity put to Router", "GET", "/identities/{rtrid}")
s("patch router identity to User", "PATCH", "/identities/{rtrid}", {"type": "User"})
s("put router identity to User", "PUT", "/identities/{rtrid}", {"name": "dt-rtr-id", "type": "User",
                                                                "isAdmin": False})
s("detail router identity after", "GET", "/identities/{rtrid}")
s("delete identity patched to Router", "DELETE", "/identities/{rtrid}")
s("create config with string data", "POST", "/configs", {"name": "dt-cfg-str", "configTypeId": "{ct}", "data": "x"})
s("create config with list data", "POST", "/configs", {"name": "dt-cfg-list", "configTypeId": "{ct}", "data": [1]})
s("create config type with string schema", "POST", "/config-types", {"name": "dt-ct-str", "schema": "x"})
s("create config type with number schema", "POST", "/config-types", {"name": "dt-ct-num", "schema": 5})
s("enrollment in the past", "POST", "/enrollments", {"method": "ott", "identityId": "{bob}",
                                                      "expiresAt": "2001-01-01T00:00:00Z"})
s("enrollment of unknown identity", "POST", "/enrollments", {"method": "ott", "identityId": "nope",
                                                              "expiresAt": "2099-01-01T00:00:00Z"})
s("jwt signer with both", "POST", "/external-jwt-signers", {
    "name": "dt-jwt-both", "enabled": True, "issuer": "https://both.example", "audience": "dt",
    "jwksEndpoint": "https://dt.example/jwks.json", "certPem": _ca_pem("dt-both")})
s("jwt signer with neither", "POST", "/external-jwt-signers", {
    "name": "dt-jwt-neither", "enabled": True, "issuer": "https://neither.example", "audience": "dt"})
s("auth policy with unknown signer", "POST", "/auth-policies",
  _auth_policy("dt-ap-bad", ["nope"], requireExtJwtSigner="nope"))
s("create auth policy to patch", "POST", "/auth-policies", _auth_policy("zz-ap-patch"), save="ap3")
s("patch auth policy with unknown signer", "PATCH", "/auth-policies/{ap3}", {
    "primary": {"extJwt": {"allowed": True, "allowedSigners": ["nope"]}}})
s("delete auth policy patched", "DELETE", "/auth-policies/{ap3}")
s("client authenticators of the admin", "GET", "client:/current-identity/authenticators")
s("summary after", "GET", "/summary")

# --- every field upstream lists, filtered and (scalars) sorted on
def _field_steps() -> None:
    from ziti_lite import wiring
    for res in wiring.resources():
        if res.name not in COLLECTIONS or "list" not in res.ops:
            continue
        for name in res.filterable:
            kind = res.symbols[name].kind
            if kind == "tags":
                query = "tags.x = null"
            elif kind == "set":
                query = f"isEmpty({name}) or not isEmpty({name})"
            else:
                query = f"{name} != null sort by {name} desc limit 2"
            s(f"field {res.name} {name}", "GET", f"/{res.name}?filter={query}")


_field_steps()

# --- a CA: create, its JWT, a verification with the wrong certificate
CA_PEM = _ca_pem("dt-ca")
s("create ca", "POST", "/cas", {"name": "dt-ca", "certPem": CA_PEM, "isAutoCaEnrollmentEnabled": True,
                                 "isOttCaEnrollmentEnabled": True, "isAuthEnabled": True,
                                 "identityRoles": ["dt"]}, save="ca")
s("create ca twice", "POST", "/cas", {"name": "dt-ca2", "certPem": CA_PEM, "isAutoCaEnrollmentEnabled": True,
                                       "isOttCaEnrollmentEnabled": True, "isAuthEnabled": True,
                                       "identityRoles": []})
s("detail ca", "GET", "/cas/{ca}")
s("create ca with a PREFIX claim on SAN_URI", "POST", "/cas", {
    "name": "dt-ca-claim", "certPem": _ca_pem("dt-ca-claim"), "isAutoCaEnrollmentEnabled": False,
    "isOttCaEnrollmentEnabled": False, "isAuthEnabled": True, "identityRoles": [],
    "externalIdClaim": {"location": "SAN_URI", "matcher": "PREFIX", "matcherCriteria": "spiffe://",
                        "parser": "NONE", "parserCriteria": "", "index": 0}}, save="caclaim")
s("delete ca with a PREFIX claim on SAN_URI", "DELETE", "/cas/{caclaim}")
s("verify ca wrong cert", "POST", "/cas/{ca}/verify", raw=_ca_pem("other").encode(), ctype="text/plain")
s("ottca enrollment unverified ca", "POST", "/enrollments", {"method": "ottca", "identityId": "{bob}",
                                                            "caId": "{ca}", "expiresAt": "2099-01-01T00:00:00Z"})
s("ott enrollment", "POST", "/enrollments", {"method": "ott", "identityId": "{bob}",
                                             "expiresAt": "2099-01-01T00:00:00Z"}, save="enr")
s("ott enrollment again", "POST", "/enrollments", {"method": "ott", "identityId": "{bob}",
                                                   "expiresAt": "2099-01-01T00:00:00Z"})
s("detail enrollment", "GET", "/enrollments/{enr}")
s("refresh enrollment in the past", "POST", "/enrollments/{enr}/refresh", {"expiresAt": "2001-01-01T00:00:00Z"})
s("refresh enrollment", "POST", "/enrollments/{enr}/refresh", {"expiresAt": "2098-01-01T00:00:00Z"})
s("delete enrollment", "DELETE", "/enrollments/{enr}")
s("enroll ott token not a uuid", "POST", "client:/enroll?method=ott&token=not-a-token", raw=b"x",
  ctype="application/x-pem-file", auth="none")
s("enroll ott unknown token", "POST", "client:/enroll?method=ott&token=8d7b5b0e-2b0b-4d3c-9e36-2a0f0f0f0f0f",
  raw=b"x", ctype="application/x-pem-file", auth="none")
s("delete ca", "DELETE", "/cas/{ca}")

# --- an updb enrollment under an auth policy asking for 8 characters, completed with 5
s("identity under the 8-character policy", "POST", "/identities", {
    "name": "dt-short", "type": "User", "isAdmin": False, "authPolicyId": "{ap}",
    "enrollment": {"updb": "dt-short"}}, save="short")
s("its updb token", "GET", "/identities/{short}", save="shorttoken=data.enrollment.updb.token")
s("updb enrollment with a short password", "POST", "client:/enroll?method=updb&token={shorttoken}",
  {"password": "Ab1!x"}, auth="none")

# --- MFA of the admin: enrol, read, a wrong code, remove
s("mfa enrol", "POST", "client:/current-identity/mfa")
s("mfa enrol twice", "POST", "client:/current-identity/mfa")
s("mfa detail unverified", "GET", "client:/current-identity/mfa")
s("mfa verify wrong code", "POST", "client:/current-identity/mfa/verify", {"code": "000000"})
s("mfa recovery codes unverified", "GET", "client:/current-identity/mfa/recovery-codes")
s("mfa delete unverified", "DELETE", "client:/current-identity/mfa")

# --- API sessions
s("api sessions of the user", "GET", '/api-sessions?filter=identity="{user}"')
s("current api session certificates", "GET", "client:/current-api-session/certificates")
s("delete current api session of the user", "DELETE", "client:/current-api-session", auth="user")
s("user after logout", "GET", "client:/current-identity", auth="user")

# --- deletes and what references refuse
s("delete config in use", "DELETE", "/configs/{cfg}")
s("delete config type in use", "DELETE", "/config-types/NH5p4FpGR")
s("delete auth policy default", "DELETE", "/auth-policies/default")
s("delete service", "DELETE", "/services/{svc2}")
s("deleted service gone", "GET", "/services/{svc2}")
s("delete identity", "DELETE", "/identities/{carol}")

# --- last: the default admin demoted (isAdmin false) keeps its management access, but lists
#     services through its policies (the bind policy of bob names none of the admin's)
s("demote the default admin", "PATCH", "/identities/{admin}", {"isAdmin": False})
s("services of the demoted default admin", "GET", '/services?filter=name contains "dt-"')
s("service detail for the demoted default admin", "GET", "/services/{svc}")
s("identities for the demoted default admin", "GET",    # dt-short: upstream enrolled it (see the table)
  '/identities?filter=name contains "dt-" and name != "dt-short"')
s("promote the default admin again", "PATCH", "/identities/{admin}", {"isAdmin": True})
s("services of the default admin again", "GET", '/services?filter=name contains "dt-"')


# ------------------------------------------------------------------ talking to one controller
class Side:
    def __init__(self, url: str, user: str, password: str):
        self.url = url
        self.ssl = ssl._create_unverified_context()  # noqa: S323 - loopback, each controller's own fresh PKI
        self.vars: dict[str, str] = {}
        status, body = self.call("POST", CLIENT + "/authenticate?method=password",
                                 json.dumps({"username": user, "password": password}).encode(), "application/json",
                                 None)
        assert status == 200, body
        self.token = body["data"]["token"]
        self.vars["admin"] = body["data"]["identity"]["id"]
        self.vars["adminauth"] = body["data"]["authenticatorId"]
        _, erps = self.call("GET", MGMT + '/edge-router-policies?filter=isSystem=true', None, "", self.token)
        self.vars["system_erp"] = erps["data"][0]["id"] if erps["data"] else "none"
        # a non-admin password user for the steps that need one
        _, ident = self.call("POST", MGMT + "/identities", json.dumps(
            {"name": "dt-user", "type": "User", "isAdmin": False}).encode(), "application/json", self.token)
        self.call("POST", MGMT + "/authenticators", json.dumps(
            {"method": "updb", "identityId": ident["data"]["id"], "username": "dt-user",
             "password": "dt-User-pw1"}).encode(), "application/json", self.token)
        status, body = self.call("POST", CLIENT + "/authenticate?method=password", json.dumps(
            {"username": "dt-user", "password": "dt-User-pw1"}).encode(), "application/json", None)
        assert status == 200, body
        self.user_token = body["data"]["token"]
        self.vars["user"] = ident["data"]["id"]

    def call(self, method: str, path: str, data: bytes | None, ctype: str, token: str | None):
        req = urllib.request.Request(self.url + path.replace(" ", "%20").replace('"', "%22"), data=data,
                                     method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        if token:
            req.add_header("zt-session", token)
        try:
            with urllib.request.urlopen(req, context=self.ssl, timeout=30) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode(errors="replace")

    def run(self, step: Step):
        fill = Filler(self.vars)
        path = step.path.format_map(fill)
        path = CLIENT + path[len("client:"):] if path.startswith("client:") else MGMT + path
        data = step.raw if step.raw is not None else (
            None if step.body is None else json.dumps(subst(step.body, fill)).encode())
        token = {"admin": self.token, "none": None, "bad": "not-a-token", "user": self.user_token,
                 "uuid": "00000000-0000-4000-8000-000000000000"}[step.auth]
        status, body = self.call(step.method, path, data, step.ctype, token)
        if step.save and status in (200, 201) and isinstance(body, dict):
            name, _, dotted = step.save.partition("=")
            value: Any = body
            for part in (dotted or "data.id").split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if isinstance(value, str):
                self.vars[name] = value
        return status, body


class Filler(dict):
    """Names a step's path and body use: one not saved reads as ``missing-<name>``."""

    def __missing__(self, key):
        return "missing-" + key


def subst(value, fill):
    """The saved names put into a step's body (strings inside lists and objects too)."""
    if isinstance(value, str):
        return value.format_map(fill)
    if isinstance(value, list):
        return [subst(v, fill) for v in value]
    if isinstance(value, dict):
        return {k: subst(v, fill) for k, v in value.items()}
    return value


# ------------------------------------------------------------------ comparing
def kind_of(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), type(v).__name__)


def shape_diff(up, lite, path: str, out: list[tuple[str, str]]) -> None:
    """Differences of field names and JSON types, recursively (values are not compared)."""
    ku, kl = kind_of(up), kind_of(lite)
    if ku != kl:
        out.append(("type", f"{path}: {ku} != {kl}"))
        return
    if ku == "object":
        for k in sorted(set(up) | set(lite)):
            p = f"{path}.{k}" if path else k
            if k not in lite:
                out.append(("missing", p))
            elif k not in up:
                out.append(("extra", p))
            else:
                shape_diff(up[k], lite[k], p, out)
    elif ku == "array":
        for a, b in _pairs(up, lite)[:4]:
            shape_diff(a, b, f"{path}[]", out)
    elif up != lite and (ku in ("boolean", "number") or path.rsplit(".", 1)[-1] in ENUMS):
        key = path.rsplit(".", 1)[-1]
        if key not in ENVIRONMENT:
            out.append(("value", f"{path}: {up!r} != {lite!r}"))


# values compared as well as types: booleans, numbers and these enumerations; not these numbers,
# which count what each controller started with (ziti-lite's embedded router, say)
ENUMS = {"type", "semantic", "method", "precedence", "terminatorStrategy", "defaultHostingPrecedence",
         "edgeRouterConnectionStatus", "syncStatus", "binding", "policyType", "typeId", "osType"}
ENVIRONMENT = {"identityRouterCount", "serviceRouterCount"}


def _key(x):
    if isinstance(x, dict):
        return x.get("name") or x.get("method") or x.get("role") or x.get("type") or x.get("id")
    return None


def _pairs(up: list, lite: list) -> list[tuple[Any, Any]]:
    """Items of two lists that stand for the same thing: by name (else method, role, type) when
    the items have one (the two controllers start with different entities), else by position."""
    if up and lite and all(_key(x) is not None for x in up + lite):
        ours: dict = {}
        for x in lite:
            ours.setdefault(_key(x), x)
        return [(x, ours[_key(x)]) for x in up if _key(x) in ours]
    return list(zip(up, lite))


def compare(step: Step, up: tuple[int, Any], lite: tuple[int, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    (su, bu), (sl, bl) = up, lite
    if su != sl:
        out.append(("status", f"{su} != {sl}"))
    if not isinstance(bu, dict) or not isinstance(bl, dict):
        if kind_of(bu) != kind_of(bl):
            out.append(("body", f"{kind_of(bu)} != {kind_of(bl)}"))
        return out
    if "error" in bu or "error" in bl:
        cu, cl = (bu.get("error") or {}).get("code"), (bl.get("error") or {}).get("code")
        if cu != cl:
            out.append(("code", f"{cu} != {cl}"))
        eu, el = bu.get("error") or {}, bl.get("error") or {}
        if ("cause" in eu) != ("cause" in el):
            out.append(("cause", f"{'cause' in eu} != {'cause' in el}"))
        elif "cause" in eu and isinstance(eu["cause"], dict) and isinstance(el["cause"], dict):
            if set(eu["cause"]) != set(el["cause"]):
                out.append(("cause", f"{sorted(eu['cause'])} != {sorted(el['cause'])}"))
            elif eu["cause"].get("field") != el["cause"].get("field"):
                out.append(("cause.field", f"{eu['cause'].get('field')} != {el['cause'].get('field')}"))
        return out
    mu, ml = bu.get("meta"), bl.get("meta")
    if kind_of(mu) != kind_of(ml):
        out.append(("meta", f"{kind_of(mu)} != {kind_of(ml)}"))
    elif isinstance(mu, dict):
        if set(mu) != set(ml):
            out.append(("meta", f"{sorted(mu)} != {sorted(ml)}"))
        fu, fl = set(mu.get("filterableFields") or []), set(ml.get("filterableFields") or [])
        if fu != fl:
            out.append(("filterableFields", f"-{sorted(fu - fl)} +{sorted(fl - fu)}"))
        pu, pl = mu.get("pagination"), ml.get("pagination")
        if isinstance(pu, dict) and isinstance(pl, dict):
            for k in ("limit", "offset"):
                if pu.get(k) != pl.get(k):
                    out.append(("pagination", f"{k} {pu.get(k)} != {pl.get(k)}"))
            own = "dt-" in step.path and isinstance(bu.get("data"), list)
            if own and pu.get("totalCount") != pl.get("totalCount"):
                out.append(("totalCount", f"{pu.get('totalCount')} != {pl.get('totalCount')}"))
    du, dl = bu.get("data"), bl.get("data")
    if isinstance(du, list) and isinstance(dl, list) and "dt-" in step.path:
        nu = [x.get("name") for x in du if isinstance(x, dict)]
        nl = [x.get("name") for x in dl if isinstance(x, dict)]
        if "sort" not in step.path:  # ids differ, so does the default order (by id)
            nu, nl = sorted(nu, key=str), sorted(nl, key=str)
        if nu != nl:
            out.append(("contents", f"{nu} != {nl}"))
    shape_diff(du, dl, "data", out)
    return out


# ------------------------------------------------------------------ the table
@dataclass
class Documented:
    step: str
    kind: str
    path: str
    reason: str
    seen: bool = field(default=False)

    def covers(self, step: str, kind: str, detail: str) -> bool:
        return (fnmatch.fnmatchcase(step, self.step) and fnmatch.fnmatchcase(kind, self.kind)
                and fnmatch.fnmatchcase(detail, self.path))


def read_table(path: Path = TABLE) -> list[Documented]:
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    assert rows[0] == ["step", "kind", "detail", "reason"], rows[0]
    return [Documented(*r) for r in rows[1:]]


# ------------------------------------------------------------------ the test
@pytest.fixture(scope="module")
def lite(ziti_lite_template, tmp_path_factory):
    ctl = testing.start(ziti_lite_template.copy(tmp_path_factory.mktemp("lite") / "net.db"),
                        ziti_lite_template.admin_password)
    yield ctl
    ctl.stop()


def test_same_answers_as_openziti(openziti, lite):
    up = Side(openziti.url, openziti.admin_user, openziti.admin_password)
    ours = Side(lite.url, lite.admin_user, lite.admin_password)
    table = [d for d in read_table() if not d.step.startswith((PERM_ROWS, V2_ROWS, V2_DOC_ROWS))]
    found: list[tuple[str, str, str]] = []
    bodies = []
    for step in SCRIPT:
        a, b = up.run(step), ours.run(step)
        bodies.append({"step": step.name, "openziti": a, "ziti-lite": b})
        for kind, detail in compare(step, a, b):
            found.append((step.name, kind, detail))
    report = os.environ.get("ZITI_LITE_DIFF_REPORT")
    if report:
        Path(report).write_text("\n".join(f"{a}\t{b}\t{c}" for a, b, c in found) + "\n")
        Path(report + ".json").write_text(json.dumps(bodies, indent=1, default=str))
    print(f"{len(SCRIPT)} requests compared, {len(found)} documented or new differences")
    assert_documented(found, table)


def assert_documented(found: list[tuple[str, str, str]], table: list) -> None:
    """Every difference ``found`` (step, kind, detail) is covered by a row of ``table``, and every
    row still covers one (a stale row is a difference that went away: remove it)."""
    undocumented = []
    for step, kind, detail in found:
        rows = [d for d in table if d.covers(step, kind, detail)]
        for d in rows:
            d.seen = True
        if not rows:
            undocumented.append(f"{step}\t{kind}\t{detail}")
    stale = [f"{d.step}\t{d.kind}\t{d.path}" for d in table if not d.seen]
    assert not undocumented, f"{len(undocumented)} differences not in {TABLE.name}:\n" + "\n".join(undocumented)
    assert not stale, f"rows of {TABLE.name} that no longer differ:\n" + "\n".join(stale)
