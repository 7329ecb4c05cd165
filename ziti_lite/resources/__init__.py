"""The resource table: every collection of the API, declared family by family.

    identities.py       identity types, identities, authenticators, API sessions
    services.py         config types, configs, services (service_view.py: the caller's view of one)
    auth.py             auth policies, external JWT signers, controllers
    cas_enrollments.py  CAs and enrollments
    routers.py          edge routers, routers, transit routers, terminators
    posture.py          posture check types and posture checks
    policies.py         service, edge router and service edge router policies
    revocations.py      revocations (OpenZiti 2.0: token ids, API sessions, identities)

Each family module's ``RESOURCES`` are mounted by ``ziti_lite.wiring``, whose ``resources()``
lists them all.
"""
