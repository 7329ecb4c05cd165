"""The policy engine: which identities may dial or bind which services, through which edge routers.

    model.py            the entity sides and policy kinds, with their membership tables
    evaluate.py         role matching (#attr, @id, #all; AllOf/AnyOf), in Python and in SQL
    links.py            the materialised membership, kept in step inside every write
    tunneler.py         Router identities and system policies of tunneler-enabled edge routers
    relations.py        the relationship list endpoints
    roles.py            roleFilter on entity lists and the role-attribute lists
    advice.py           /identities/{id}/policy-advice/{serviceId}
    service_configs.py  /identities/{id}/service-configs
    checks.py           integrity checks of the derived tables

The resources themselves (service, edge router and service edge router policies) are declared
in ``ziti_lite.resources.policies``.
"""
