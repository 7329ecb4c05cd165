"""The client API that SDKs and tunnelers call after they log in: their services, sessions,
edge routers, posture responses and API session certificates (``ziti_lite.client.*``)."""
