__version__ = "0.1.0"

# the upstream OpenZiti controller release whose edge APIs ziti-lite serves: clients read the
# version document's ``version`` as the controller's and gate features on it (the C SDK 1.18 and
# ZAC 4.5 the 2.0 ones: enrollment from an identity provider; routers of v1.6.3 and later report
# their interfaces). The 2.0 line: see the README's "Which version ziti-lite names" for each client.
UPSTREAM_VERSION = "2.0.3"
