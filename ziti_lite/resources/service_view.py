"""The caller-dependent parts of a service detail: permissions, merged config, posture queries.

The policy engine replaces ``permissions_for`` when it is loaded; until then an admin sees
every service with no permissions, as upstream shows ``["Invalid"]``.
"""

from __future__ import annotations


def permissions_for(ctx, service_id: str) -> list[str]:
    return ["Invalid"]


def decorate(ctx, row: dict, out: dict) -> None:
    perms = permissions_for(ctx, row["id"]) if ctx.session else []
    out["permissions"] = perms
    out["config"] = {}
    out["postureQueries"] = [
        {"policyId": f"dummy {p.lower()} policy: no posture checks defined", "policyType": p,
         "isPassing": True, "postureQueries": []} for p in perms
    ]
