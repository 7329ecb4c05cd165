"""Enrollments: one-time tokens that turn into credentials.

An enrollment is a one-time token (the ``jti`` of its JWT) that turns into a credential:
``ott`` → a certificate issued from the client's CSR, ``ottca`` → a certificate from a
registered CA bound to an existing identity, ``updb`` → a password, ``erott``/``trott`` → a
router's client and server certificates. ``ca`` (auto CA enrollment) needs no token: a
certificate from a CA with auto enrollment on creates a new identity. A completed enrollment is
deleted in the same transaction that stores the credential, so a token works once.

    complete.py  redeeming them (used by the ``/enroll`` handlers in ``handlers/enrollment.py``)

Making enrollments and their JWTs is ``ziti_lite/auth/enrollments.py`` (used by the identity,
router and CA resources). The two are apart, in two layers, so that the resources that create
enrollments never import the code that completes them, which itself writes identities,
authenticators and routers through the resources.
"""
