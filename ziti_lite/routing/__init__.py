"""What both kinds of router rely on, below both: the embedded router (``edge/``) and the control
channel of real routers (``ctrl/``) import this, never each other.

* ``checks.py``: the database checks before traffic passes (hello, session, policies, reconcile);
* ``strategy.py``: which terminator a dial tries first, and the one table of dial penalties;
* ``presence.py``: router presence (online/offline, connections, route paths), written by the
  routers and read by the API;
* ``version.py``: the version a router names in its hello and ``versionInfo``.

It sits below the resources (which read presence) and above auth and the policy engine (which the
checks ask). The channel codec both speak is a layer further down (``channel/``).
"""
