"""The controller's own certificates over time: renewal, the live TLS contexts that present them,
what expires when, and the checks ``serve`` runs before it listens.

A ziti-lite network must not stop on the day its certificates end: ``renewal`` re-issues them in
a window before their end (at start and on the janitor's timer), ``contexts`` loads the new
server certificate into every live TLS server context, ``expiry`` says how long each one has
left (metrics, health checks, ``ziti-lite check``), and ``startup`` refuses to serve with a
certificate that cannot work, in one line.
"""
