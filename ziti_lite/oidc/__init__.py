"""The ``oauth2`` security scheme: the controller's OIDC provider (``provider.py``) and the
tokens it issues and the edge APIs and the embedded router accept (``tokens.py``)."""
