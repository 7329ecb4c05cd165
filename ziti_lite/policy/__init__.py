"""The policy engine: which identities may dial or bind which services, through which edge routers.

    model.py            the entity sides and policy kinds, with their membership tables
    evaluate.py         role matching (#attr, @id, #all; AllOf/AnyOf), in Python and in SQL
    links.py            the materialised membership, kept in step inside every write
    checks.py           integrity checks of the derived tables
    access.py           what a caller may see and use: its visible services, posture checks
    posture_checks.py   posture evaluation, and the one table of posture check types
    session_posture.py  which policies' posture passes for a session, and the sessions that no longer do

The resources themselves (service, edge router and service edge router policies) are declared
in ``ziti_lite.resources.policies``; the policy endpoints (relationship and role-attribute lists,
advice, service configs) and the tunneler listener are operations, in ``ziti_lite.handlers``.
"""
