"""Events and audit: the controller's event stream in upstream v1.3.3's JSON shapes (``bus``,
``shapes``), where events come from (``tables``: rows of API sessions, sessions and terminators;
``reports``: the calls a router makes, named apart from the ``fabric/`` API package;
``changes``: every entity write of the generic handlers; ``audit``: login outcomes), where they
go (``sinks``: a JSON-lines file or stdout; ``stream``: server-sent events; ``wsapi``: the
WebSocket ``ziti fabric stream events`` reads), and the audit trail in the database
(``audit``). ``runtime`` starts and stops what runs beside a serving controller."""
