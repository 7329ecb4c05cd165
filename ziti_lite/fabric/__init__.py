"""The fabric management API (``/fabric/v1``): what operators read about the network's routers,
links, services, terminators and circuits, in upstream's shapes, for ``ziti fabric list`` and
``ziti edge validate service-hosting``.

``entities.py`` serves the rows kept in SQLite (routers with their live state, services,
terminators); ``live.py`` the control channel's in-memory tables (links, circuits), filtered and
paged with the same ZitiQL compiler. Read operations only, every one for admins.
"""
