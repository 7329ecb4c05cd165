"""The ``oauth2`` security scheme: the controller's OIDC provider (``provider.py``). The tokens it
issues, which the edge APIs and the embedded router accept, are ``ziti_lite/auth/oidc_tokens.py``
(below the resources: the request path verifies them)."""
