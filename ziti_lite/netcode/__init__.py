"""Network as code: ``ziti-lite apply`` / ``test`` / ``why``.

A network file is a ``ziti ops export`` document (the entity lists and ``@name`` references of
``exchange.py``), as JSON or YAML, with an optional ``tests`` list of policy assertions. The
package reads it (``document``), compares it with a live network read through the management
API (``plan``), rehearses the change on a scratch ziti-lite and checks the assertions there with
ziti-lite's own policy engine (``scratch``, ``assertions``), then writes it through the same API
(``apply``): on a database file in-process (``exchange.LocalApi``) inside one transaction, on a
running controller over HTTPS (``remote``). ``why`` explains one identity's access to one
service from the same API's relationship lists. Nothing here knows a validation or policy rule:
every write goes through the API handlers, every membership question to the policy engine.
"""
