"""The policy model's joins (``policy/model.py``): the identity -> router and service -> router
queries are written once, there, and every reader composes them."""

from __future__ import annotations

import pathlib
import re

import ziti_lite
from ziti_lite.policy import model

PACKAGE = pathlib.Path(ziti_lite.__file__).parent
JOINS = re.compile(r"JOIN (service_)?edge_router_policy_routers r ON r\.policy_id = [is]\.policy_id")


def test_the_router_joins_are_written_only_in_the_model():
    elsewhere = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py"))
                 if p != pathlib.Path(model.__file__) and JOINS.search(p.read_text())]
    assert not elsewhere, f"an identity/service -> router join written again (use policy.model): {elsewhere}"
    # and the readers use it: relations, client access and caller, advice, the routers' check
    from ziti_lite.client import caller
    from ziti_lite.handlers import advice, relations
    from ziti_lite.policy import access
    from ziti_lite.routing import checks
    assert model.IDENTITY_ROUTERS in access.ROUTERS_SQL
    assert model.identity_router_ids("?1") in checks._ALLOWED
    assert "identity_router_ids" in vars(advice) and "IDENTITY_ROUTERS" in vars(caller)
    assert "IDENTITY_ROUTERS" in vars(relations)

