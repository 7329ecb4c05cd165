"""The request machinery (the ``http`` layer): the route trie (``router.py``), ``@op`` and its
registry (``ops.py``), the request context ``Ctx`` (``context.py``) with what it names of the
controller (``controller.py``, ``ApiController``) and of the caller (``caller.py``, ``Session``),
envelopes, the declarative ``Resource`` and the generic CRUD handlers and routes every resource
gets (``crud.py``, ``routes.py``) and the rendering of their rows (``render.py``). No operation
lives here: hand-written ones are in ``ziti_lite.handlers``, ``client``, ``fabric`` and beside
their resources."""
