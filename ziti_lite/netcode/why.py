"""``ziti-lite why IDENTITY SERVICE``: every reason that decides one identity's access to one
service, read from the management API, so that it answers alike for a database file, a
running ziti-lite and an OpenZiti controller.

Which policies select the identity and the service comes from the relationship lists
(``/identities/{id}/service-policies``, ``/services/{id}/service-policies``, ...), which role
of a policy matches from the lists' ``roleFilter``: the policy engine answers both, nothing
here re-implements role matching. The end is upstream's policy advice for the pair, so the
answer holds everything ``ziti edge policy-advisor identities -q`` shows.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from ..exchange import ApiBase
from .document import NetcodeError


def get(api: ApiBase, path: str) -> Any:
    status, body = api.call("GET", path)
    if status != 200:
        error = (body or {}).get("error") or {}
        raise NetcodeError(f"GET {path}: {status} {error.get('code')}")
    return body["data"]


def listing(api: ApiBase, path: str, **query: str) -> list[dict]:
    out: list[dict] = []
    while True:
        q = urllib.parse.urlencode({**query, "limit": "500", "offset": str(len(out))})
        status, body = api.call("GET", f"{path}?{q}")
        if status != 200:
            raise NetcodeError(f"GET {path}: {status} {((body or {}).get('error') or {}).get('code')}")
        out.extend(body["data"])
        if not body["data"] or len(out) >= body["meta"]["pagination"]["totalCount"]:
            return out


NOUNS = {"identities": "identity", "services": "service", "edge-routers": "edge router"}


def find(api: ApiBase, collection: str, ref: str) -> dict:
    """An entity by name, by id, or by ``@name``/``@id``."""
    key = ref[1:] if ref.startswith("@") else ref
    for query in (f"name = {json.dumps(key)}", f"id = {json.dumps(key)}"):
        rows = listing(api, f"/{collection}", filter=query)
        if rows:
            return rows[0]
    raise NetcodeError(f"no {NOUNS.get(collection, collection)} named {ref!r}")


def matches(api: ApiBase, collection: str, entity_id: str, role: str) -> bool:
    """Does this one role select the entity? Asked of the policy engine (``roleFilter``)."""
    rows = listing(api, f"/{collection}", filter=f"id = {json.dumps(entity_id)}", roleFilter=role,
                   roleSemantic="AnyOf")
    return bool(rows)


def side(api: ApiBase, collection: str, entity: dict, policy: dict, field: str, selected: bool) -> str:
    """Why one side of a policy does or does not select the entity, role by role (``@id`` roles
    shown by name, as the policy's ``*RolesDisplay``)."""
    shown = {d.get("role"): d.get("name") for d in policy.get(field + "Display") or []}
    semantic = policy.get("semantic") or "AnyOf"
    raw = policy.get(field) or []
    if not raw:
        return "no roles: selects nothing"
    hit = [shown.get(r) or r for r in raw if matches(api, collection, entity["id"], r)]
    roles = [shown.get(r) or r for r in raw]
    miss = [r for r in roles if r not in hit]
    if selected:
        return f"matched by {', '.join(hit)}" + (f" ({semantic}: all of {', '.join(roles)})" if semantic == "AllOf"
                                                 else "")
    if semantic == "AllOf" and hit:
        return f"{semantic}: {', '.join(miss)} did not match (only {', '.join(hit)} did)"
    return f"{semantic}: none of {', '.join(roles)} matched"


@dataclass
class PolicyVerdict:
    allowed: bool
    granting: list[dict] = dc_field(default_factory=list)
    lines: list[str] = dc_field(default_factory=list)


def service_policies(api: ApiBase, identity: dict, service: dict, policy_type: str) -> PolicyVerdict:
    """The service policies of one type: those that grant, and why each other one does not."""
    of_identity = {p["id"] for p in listing(api, f"/identities/{identity['id']}/service-policies")}
    of_service = {p["id"] for p in listing(api, f"/services/{service['id']}/service-policies")}
    policies = [p for p in listing(api, "/service-policies") if p.get("type") == policy_type]
    verdict = PolicyVerdict(False)
    for p in sorted(policies, key=lambda p: (not (p["id"] in of_identity and p["id"] in of_service), p["name"])):
        on_i, on_s = p["id"] in of_identity, p["id"] in of_service
        i_why = side(api, "identities", identity, p, "identityRoles", on_i)
        s_why = side(api, "services", service, p, "serviceRoles", on_s)
        if on_i and on_s:
            verdict.allowed = True
            verdict.granting.append(p)
            verdict.lines.append(f"  grants   {p['name']}: identity {i_why}; service {s_why}")
        else:
            reasons = ([] if on_i else [f"identity {i_why}"]) + ([] if on_s else [f"service {s_why}"])
            verdict.lines.append(f"  no       {p['name']}: {'; '.join(reasons)}")
    if not policies:
        verdict.lines.append(f"  (no {policy_type} service policy exists)")
    return verdict


def explain(api: ApiBase, identity_ref: str, service_ref: str, policy_type: str = "Dial") -> tuple[bool, list[str]]:
    identity = find(api, "identities", identity_ref)
    service = find(api, "services", service_ref)
    iid, sid = identity["id"], service["id"]
    out = [f"identity {identity['name']} ({iid}), service {service['name']} ({sid}), {policy_type.lower()}:"]
    blocked: list[str] = []

    _identity_step(identity, out, blocked)
    verdict = _policy_step(api, identity, service, policy_type, out, blocked)
    checks = _posture_step(api, iid, verdict, out)
    _auth_step(api, identity, checks, out, blocked)
    _router_step(api, iid, sid, out, blocked)
    _config_step(api, iid, sid, out)
    _advice_step(api, iid, sid, out)
    ok = not blocked
    out.append(f"verdict: {identity['name']} {'can' if ok else 'cannot'} {policy_type.lower()} {service['name']}"
               + ("" if ok else ": " + "; ".join(blocked)))
    return ok, out


# the steps of explain, in order: each appends its lines, and what blocks the pair
def _identity_step(identity: dict, out: list[str], blocked: list[str]) -> None:
    """1. The identity itself."""
    if identity.get("disabled"):
        until = identity.get("disabledUntil")
        out.append(f"identity: DISABLED{' until ' + until if until else ' (until enabled again)'}")
        blocked.append("the identity is disabled")
    else:
        out.append("identity: enabled")


def _policy_step(api: ApiBase, identity: dict, service: dict, policy_type: str, out: list[str],
                 blocked: list[str]) -> PolicyVerdict:
    """2. Service policies."""
    verdict = service_policies(api, identity, service, policy_type)
    out.append(f"service policies ({policy_type}): {'granted' if verdict.allowed else 'NOT granted'}")
    out.extend(verdict.lines)
    if not verdict.allowed:
        blocked.append(f"no {policy_type} service policy selects both")
    other = "Bind" if policy_type == "Dial" else "Dial"
    other_verdict = service_policies(api, identity, service, other)
    granted_by = ", ".join(p["name"] for p in other_verdict.granting)
    out.append(f"  ({other}: {'granted by ' + granted_by if other_verdict.allowed else 'not granted'})")
    return verdict


def _posture_step(api: ApiBase, iid: str, verdict: PolicyVerdict, out: list[str]) -> dict[str, dict]:
    """3. Posture checks of the granting policies, and the identity's posture data now."""
    posture = get(api, f"/identities/{iid}/posture-data")
    checks: dict[str, dict] = {}
    for p in verdict.granting:
        for c in listing(api, f"/service-policies/{p['id']}/posture-checks"):
            checks.setdefault(c["id"], c)
    if not checks:
        out.append("posture checks: none required")
    else:
        out.append(f"posture checks: {len(checks)} required (any one granting policy whose checks pass suffices)")
        for c in sorted(checks.values(), key=lambda c: c["name"]):
            out.append(f"  {c['name']} ({c['typeId']}): requires {_posture_requirement(c)};"
                       f" reported now: {_posture_state(c, posture)}")
    return checks


def _auth_step(api: ApiBase, identity: dict, checks: dict[str, dict], out: list[str], blocked: list[str]) -> None:
    """4. Authentication: MFA and the auth policy."""
    policy = get(api, f"/auth-policies/{identity['authPolicyId']}") if identity.get("authPolicyId") else None
    if policy is not None:
        primary = policy.get("primary") or {}
        allowed = [m for m in ("cert", "updb", "extJwt") if (primary.get(m) or {}).get("allowed")]
        secondary = policy.get("secondary") or {}
        extra = []
        if secondary.get("requireTotp"):
            extra.append("TOTP (MFA) at login")
        if secondary.get("requireExtJwtSigner"):
            extra.append(f"a JWT of signer {secondary['requireExtJwtSigner']}")
        out.append(f"auth policy {policy['name']}: logins by {', '.join(allowed) or 'nothing'}"
                   f"; secondary: {', '.join(extra) or 'none'}")
        if secondary.get("requireTotp") and not identity.get("isMfaEnabled"):
            out.append("  the identity has no MFA enrolled: it cannot log in until it enrolls TOTP")
            blocked.append("MFA is required and not enrolled")
    mfa_checks = [c for c in checks.values() if c["typeId"] == "MFA"]
    out.append(f"MFA: {'enrolled' if identity.get('isMfaEnabled') else 'not enrolled'}"
               + (f"; required by posture check(s) {', '.join(c['name'] for c in mfa_checks)}" if mfa_checks else ""))


def _router_step(api: ApiBase, iid: str, sid: str, out: list[str], blocked: list[str]) -> None:
    """5. Edge routers: both router policy kinds and the routers they leave in common."""
    erps = listing(api, f"/identities/{iid}/edge-router-policies")
    serps = listing(api, f"/services/{sid}/service-edge-router-policies")
    i_routers = {r["id"]: r for r in listing(api, f"/identities/{iid}/edge-routers")}
    s_routers = {r["id"]: r for r in listing(api, f"/services/{sid}/edge-routers")}
    out.append(f"edge router policies of the identity: {', '.join(p['name'] for p in erps) or 'none'}"
               f" -> {len(i_routers)} router(s)")
    out.append(f"service edge router policies of the service: {', '.join(p['name'] for p in serps) or 'none'}"
               f" -> {len(s_routers)} router(s)")
    common = sorted((i_routers[r] for r in set(i_routers) & set(s_routers)), key=lambda r: r["name"])
    if common:
        online = [r for r in common if r.get("isOnline")]
        out.append("common routers: " + ", ".join(f"{r['name']} ({'online' if r.get('isOnline') else 'offline'})"
                                                  for r in common))
        if not online:
            blocked.append("no common edge router is online")
    else:
        out.append("common routers: none")
        blocked.append("the identity and the service share no edge router")


def _config_step(api: ApiBase, iid: str, sid: str, out: list[str]) -> None:
    """6. The configs the identity would receive."""
    configs = {c["configTypeId"]: c for c in listing(api, f"/services/{sid}/configs")}
    for o in listing(api, f"/identities/{iid}/service-configs"):
        if o.get("serviceId") == sid:
            override = get(api, f"/configs/{o['configId']}")
            configs[override["configTypeId"]] = {**override, "name": f"{override['name']} (identity override)"}
    if configs:
        out.append("configs: " + ", ".join(
            f"{c['name']} ({(c.get('configType') or {}).get('name') or c['configTypeId']})" for c in configs.values()))
    else:
        out.append("configs: none")


def _advice_step(api: ApiBase, iid: str, sid: str, out: list[str]) -> None:
    """7. Upstream's policy advice for the same pair."""
    advice = get(api, f"/identities/{iid}/policy-advice/{sid}")
    out.append(f"policy advice: dial {'allowed' if advice.get('isDialAllowed') else 'not allowed'},"
               f" bind {'allowed' if advice.get('isBindAllowed') else 'not allowed'},"
               f" {advice.get('identityRouterCount', 0)} identity router(s),"
               f" {advice.get('serviceRouterCount', 0)} service router(s),"
               f" common: {', '.join(r['name'] for r in advice.get('commonRouters') or []) or 'none'}")


def _posture_requirement(c: dict) -> str:
    t = c["typeId"]
    if t == "DOMAIN":
        return "domain in " + ", ".join(c.get("domains") or [])
    if t == "MAC":
        return "a MAC address in " + ", ".join(c.get("macAddresses") or [])
    if t == "OS":
        return "OS " + ", ".join(f"{o.get('type')} {' '.join(o.get('versions') or [])}".strip()
                                 for o in c.get("operatingSystems") or [])
    if t in ("PROCESS", "PROCESS_MULTI"):
        procs = c.get("processes") or ([c["process"]] if c.get("process") else [])
        return "process " + ", ".join(p.get("path", "?") for p in procs)
    if t == "MFA":
        return f"MFA passed (timeout {c.get('timeoutSeconds')} s)"
    return t


def _posture_state(c: dict, posture: dict) -> str:
    t = c["typeId"]
    if t == "DOMAIN":
        return (posture.get("domain") or {}).get("domain") or "no domain reported"
    if t == "MAC":
        return ", ".join((posture.get("mac") or {}).get("addresses") or []) or "no MAC addresses reported"
    if t == "OS":
        os_ = posture.get("os") or {}
        return f"{os_.get('type')} {os_.get('version')}" if os_.get("type") else "no OS reported"
    if t in ("PROCESS", "PROCESS_MULTI"):
        seen = [p for p in posture.get("processes") or [] if p.get("postureCheckId") == c["id"]]
        return ", ".join("running" if p.get("isRunning") else "not running" for p in seen) or "no process reported"
    if t == "MFA":
        passed = [s for s in (posture.get("apiSessionPostureData") or {}).values()
                  if (s.get("mfa") or {}).get("passedMfa")]
        return f"MFA passed in {len(passed)} API session(s)"
    return "?"
