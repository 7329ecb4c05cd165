"""The OpenZiti channel (V2) codec: what every peer that speaks the channel shares. SDKs to the
embedded router (``edge/``), real routers on the control channel (``ctrl/``) and the management
WebSocket (``events/wsapi.py``) all frame messages with it.

* ``wire.py``: the message format, content types and header ids, the bounded stream decoder;
* ``replies.py``: requests awaiting their reply on a channel.

It imports nothing of ziti-lite: a layer just above the foundation.
"""
