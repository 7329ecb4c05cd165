"""The request machinery (the ``http`` layer): the route trie (``router.py``), ``@op`` and its
registry (``ops.py``), the request context ``Ctx`` (``context.py``), envelopes, the declarative
``Resource`` and the generic CRUD handlers and routes every resource gets. No operation lives
here: hand-written ones are in ``ziti_lite.handlers``, ``client``, ``fabric`` and beside their
resources."""
