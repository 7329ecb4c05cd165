"""``ziti-lite why IDENTITY SERVICE``: every reason, and at least what upstream's policy advice
(``/identities/{id}/policy-advice/{serviceId}``) says for the same pair."""

from __future__ import annotations

import pytest

from tests.netcode.conftest import invoke
from ziti_lite.edge.entity import ensure_router


@pytest.fixture
def network(admin, ctl):
    ensure_router(ctl, "ziti-lite")                    # the embedded router (offline: no listener here)
    strict = admin.create("auth-policies", {"name": "strict", "primary": {
        "cert": {"allowed": True, "allowExpiredCerts": False}, "extJwt": {"allowed": False, "allowedSigners": []},
        "updb": {"allowed": True, "lockoutDurationMinutes": 0, "maxAttempts": 0, "minPasswordLength": 5,
                 "requireMixedCase": False, "requireNumberChar": False, "requireSpecialChar": False}},
        "secondary": {"requireTotp": True}})
    ids = {
        "alice": admin.create("identities", {"name": "alice", "type": "Default", "isAdmin": False,
                                             "roleAttributes": ["sales"], "authPolicyId": strict}),
        "bob": admin.create("identities", {"name": "bob", "type": "Default", "isAdmin": False,
                                           "roleAttributes": ["sales", "ops"]}),
    }
    assert admin.post(f"/identities/{ids['bob']}/disable", json={"durationMinutes": 60}).status_code == 200
    intercept = admin.create("configs", {"name": "crm-intercept", "configTypeId": "g7cIWbcGg", "data": {
        "protocols": ["tcp"], "addresses": ["crm.ziti"], "portRanges": [{"low": 443, "high": 443}]}})
    ids["crm"] = admin.create("services", {"name": "crm", "encryptionRequired": True, "roleAttributes": ["crm"],
                                           "configs": [intercept]})
    admin.create("posture-checks", {"name": "corp-domain", "typeId": "DOMAIN", "domains": ["corp.example"],
                                    "roleAttributes": ["corp"]})
    admin.create("service-policies", {"name": "crm-dial", "type": "Dial", "semantic": "AnyOf",
                                      "identityRoles": ["#sales"], "serviceRoles": ["#crm"],
                                      "postureCheckRoles": ["#corp"]})
    admin.create("service-policies", {"name": "ops-dial", "type": "Dial", "semantic": "AllOf",
                                      "identityRoles": ["#ops", "#sales"], "serviceRoles": ["#crm"]})
    admin.create("service-policies", {"name": "crm-bind", "type": "Bind", "semantic": "AnyOf",
                                      "identityRoles": [f"@{ids['bob']}"], "serviceRoles": ["@" + ids["crm"]]})
    return ids


def why(db, *args):
    r = invoke("why", "--db", db, *args)
    assert r.exit_code == 0, r.output
    return r.output


def test_every_reason_in_order(network, db_path, admin):
    out = why(db_path, "alice", "crm")
    lines = out.splitlines()
    assert lines[0].startswith(f"identity alice ({network['alice']}), service crm ({network['crm']}), dial:")
    assert lines[1] == "identity: enabled"
    assert "service policies (Dial): granted" in out
    assert "  grants   crm-dial: identity matched by #sales; service matched by #crm" in out
    assert "  no       ops-dial: identity AllOf: #ops did not match (only #sales did)" in out
    assert "  (Bind: not granted)" in out
    assert "corp-domain (DOMAIN): requires domain in corp.example; reported now: no domain reported" in out
    assert "auth policy strict: logins by cert, updb; secondary: TOTP (MFA) at login" in out
    assert "the identity has no MFA enrolled" in out
    assert "edge router policies of the identity: all-endpoints-public-routers -> 1 router(s)" in out
    assert "service edge router policies of the service: all-routers-all-services -> 1 router(s)" in out
    assert "common routers: ziti-lite (offline)" in out
    assert "configs: crm-intercept (intercept.v1)" in out
    assert lines[-1] == ("verdict: alice cannot dial crm: MFA is required and not enrolled;"
                         " no common edge router is online")
    sections = ["identity:", "service policies", "posture checks", "auth policy", "MFA:", "edge router policies",
                "common routers", "configs:", "policy advice", "verdict"]
    positions = [next(i for i, line in enumerate(lines) if line.startswith(s)) for s in sections]
    assert positions == sorted(positions)


def test_disabled_until_and_bind_by_id(network, db_path, admin):
    detail = admin.get(f"/identities/{network['bob']}").json()["data"]
    out = why(db_path, network["bob"], "@crm", "--bind")    # an id, and an @name
    assert f"identity: DISABLED until {detail['disabledUntil']}" in out
    assert "  grants   crm-bind: identity matched by @bob; service matched by @crm" in out
    assert "(Dial: granted by crm-dial, ops-dial)" in out
    assert "the identity is disabled" in out.splitlines()[-1]


@pytest.mark.parametrize("who, kind", [("alice", "--dial"), ("bob", "--bind"), ("alice", "--bind")])
def test_at_least_what_the_policy_advice_says(network, db_path, admin, who, kind):
    advice = admin.get(f"/identities/{network[who]}/policy-advice/{network['crm']}").json()["data"]
    out = why(db_path, who, "crm", kind)
    dial = "dial allowed" if advice.get("isDialAllowed") else "dial not allowed"
    bind = "bind allowed" if advice.get("isBindAllowed") else "bind not allowed"
    assert f"policy advice: {dial}, {bind}, {advice.get('identityRouterCount', 0)} identity router(s)" in out
    for router in advice["commonRouters"] or []:
        assert f"{router['name']} ({'online' if router.get('isOnline') else 'offline'})" in out
    allowed = advice.get("isDialAllowed" if kind == "--dial" else "isBindAllowed", False)
    policy_type = "Dial" if kind == "--dial" else "Bind"
    assert f"service policies ({policy_type}): {'granted' if allowed else 'NOT granted'}" in out


def test_unknown_names_are_one_line(network, db_path):
    r = invoke("why", "--db", db_path, "carol", "crm")
    assert r.exit_code == 1 and r.output.strip() == "Error: no identity named 'carol'"
    r = invoke("why", "--db", db_path, "alice", "nope")
    assert r.exit_code == 1 and r.output.strip() == "Error: no service named 'nope'"
