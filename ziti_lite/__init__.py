__version__ = "0.1.0"

# the upstream OpenZiti controller release whose edge APIs ziti-lite serves: clients read the
# version document's ``version`` as the controller's and gate features on it
UPSTREAM_VERSION = "1.3.3"
