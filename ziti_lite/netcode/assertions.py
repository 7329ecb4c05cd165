"""The ``tests`` of a network file, evaluated through the management API's relationship lists
(``/identities/{id}/services?policyType=...``, ``/identities/{id}/edge-routers``,
``/services/{id}/edge-routers``), that is by the policy engine of whatever answers: the
network as it will be inside ``apply``'s transaction or rehearsal, or the live one for
``ziti-lite test``. A failure says which assertion and why (``why.service_policies``).

Forms (``name`` optional on each; identities and services by name or ``@id``):
``{identity, service, can|cannot: dial|bind}``; ``{identity, service, router[, can|cannot: dial]}``
(reaches the service through that edge router); ``{identity, services: [...], policyType}``
(exactly these services).
"""

from __future__ import annotations

from ..exchange import ApiBase
from . import why
from .document import NetcodeError, describe


def results(api: ApiBase, tests: list[dict]) -> list[str | None]:
    """For each assertion, None when it holds, else why not."""
    out: list[str | None] = []
    for t in tests:
        try:
            out.append(check(api, t))
        except NetcodeError as e:
            out.append(str(e))
    return out


def evaluate(api: ApiBase, tests: list[dict]) -> list[str]:
    """Every failed assertion, as ``<assertion>: <why>``."""
    return [f"{describe(t)}: {problem}" for t, problem in zip(tests, results(api, tests), strict=True) if problem]


def services_of(api: ApiBase, identity_id: str, action: str) -> dict[str, str]:
    return {s["id"]: s["name"] for s in why.listing(api, f"/identities/{identity_id}/services", policyType=action)}


def check(api: ApiBase, t: dict) -> str | None:
    """None when the assertion holds, else why not."""
    identity = why.find(api, "identities", t["identity"])
    if "services" in t:
        action = t.get("policyType", "dial").lower()
        have = set(services_of(api, identity["id"], action).values())
        want = {s[1:] if s.startswith("@") else s for s in t["services"]}
        want = {why.find(api, "services", s)["name"] if s not in have else s for s in want}
        if have == want:
            return None
        missing, extra = sorted(want - have), sorted(have - want)
        return "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                         + ([f"also has {', '.join(extra)}"] if extra else []))
    service = why.find(api, "services", t["service"])
    verb = "can" if "can" in t else "cannot" if "cannot" in t else "can"
    action = t.get(verb, "dial").lower()
    policy_type = action.capitalize()
    granted = service["id"] in services_of(api, identity["id"], action)
    problem = None
    if verb == "can" and not granted:
        verdict = why.service_policies(api, identity, service, policy_type)
        problem = f"no {policy_type} policy grants it:" + " |".join(line.strip().removeprefix("no")
                                                                   for line in verdict.lines)
    if "router" in t:
        router = why.find(api, "edge-routers", t["router"])
        i_routers = {r["id"] for r in why.listing(api, f"/identities/{identity['id']}/edge-routers")}
        s_routers = {r["id"] for r in why.listing(api, f"/services/{service['id']}/edge-routers")}
        through = router["id"] in i_routers and router["id"] in s_routers
        if verb == "can" and not problem and not through:
            sides = ([] if router["id"] in i_routers else ["no edge router policy gives it to the identity"]) + (
                [] if router["id"] in s_routers else ["no service edge router policy gives it to the service"])
            problem = f"not through {router['name']}: {'; '.join(sides)}"
        if verb == "cannot" and granted and through:
            problem = f"it can: granted and {router['name']} serves both"
        return problem
    if verb == "cannot" and granted:
        verdict = why.service_policies(api, identity, service, policy_type)
        problem = "it can: " + " |".join(line.strip().removeprefix("grants").strip() for line in verdict.lines
                                         if line.strip().startswith("grants"))
    return problem
