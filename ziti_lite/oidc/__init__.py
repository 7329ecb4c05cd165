"""The ``oauth2`` security scheme: the controller's OIDC provider, split by job: ``provider.py``
(the ASGI handler: route table, dispatch, discovery, JWKS, the auth requests it keeps),
``login.py`` (authorize and the login steps, through ``auth.methods.METHODS`` and
``handlers/totp.py``), ``grants.py`` (token, refresh, revoke, introspect, userinfo, end session),
``common.py`` (the auth request record, form and answer helpers). The tokens it issues, which the
edge APIs and the embedded router accept, are ``ziti_lite/auth/oidc_tokens.py`` (below the
resources: the request path verifies them)."""
