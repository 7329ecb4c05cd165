"""Credentials and logins (the ``auth`` layer): auth policies, the registry of login methods
and auth queries, API sessions, passwords, TOTP, certificates, ext-jwt, the enrollments that
turn into credentials (``enrollments.py``) and the OIDC tokens that name API sessions
(``oidc_tokens.py``). The endpoints that log in are operations, in ``ziti_lite.handlers``."""
