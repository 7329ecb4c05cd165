"""Events and audit: the controller's event stream in upstream v1.3.3's JSON shapes (``bus``,
``shapes``), where events come from (``tables``: rows of API sessions, sessions and terminators;
``fabric``: the calls a router makes; ``changes``: every entity write of the management API), where
they go (``sinks``: a JSON-lines file or stdout; ``stream``: server-sent events), and the audit
trail in the database (``audit``). ``runtime`` starts and stops what runs beside a serving
controller."""
