"""The client API that SDKs and tunnelers call after they log in: their services, sessions,
edge routers, posture responses and API session certificates (``ziti_lite.client.*``).

Operations only: what the client API decides with (access, posture evaluation) is the policy
engine's, in ``ziti_lite.policy``."""
