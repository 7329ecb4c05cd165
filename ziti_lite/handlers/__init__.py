"""Hand-written operations and hooks over the resources: the ``operations`` layer (above the
resources, the policy engine and auth; below wiring). The generic CRUD of every collection is
``api/crud.py``'s; what is not generic is here, beside the resource families' own small ops.

    authentication.py   /authenticate, /current-api-session, /current-identity; the password method
    mfa.py              TOTP enrollment and /authenticate/mfa; the TOTP auth query
    totp.py             the TOTP enrollment both mfa.py and the OIDC login use (audited alike)
    enrollment.py       /enroll*, authenticator re-enroll and extend, CA verify; the cert method
    informational.py    /version, /, /specs, the EST CA certs, /network-jwts, /summary
    spec.py             the OpenAPI documents /specs serves, built from the resource table
    settings.py         /controller-settings: upstream's 501s (not implemented there either)
    database.py         /database/* (integrity check and fix, snapshot)
    relations.py        the relationship lists (/identities/{id}/services, ...)
    roles.py            roleFilter on entity lists and the role-attribute lists
    advice.py           /identities/{id}/policy-advice/{serviceId}
    service_configs.py  /identities/{id}/service-configs
    tunneler.py         Router identities and system policies of tunneler-enabled edge routers
    common.py           the part of the controller the handlers read (HandlersController)

The other folders of this layer: ``enroll/`` (redeeming enrollments), ``client/`` (the client
API), ``fabric/`` (the fabric API).
"""
