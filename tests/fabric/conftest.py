"""Fixtures of the fabric API tests: the API at ``/fabric/v1`` as the admin, and a non-admin."""

from __future__ import annotations

import pytest

from tests.conftest import Api

FABRIC = "/fabric/v1"


@pytest.fixture
def fabric(admin) -> Api:
    return admin.as_prefix(FABRIC)


@pytest.fixture
def plain(admin) -> Api:
    """A logged-in identity that is not an admin, on the fabric API."""
    iid = admin.create("identities", {"name": "plain-user", "type": "User", "isAdmin": False})
    admin.create("authenticators", {"method": "updb", "identityId": iid, "username": "plain-user",
                                    "password": "Plain-pw1"})
    return Api(admin.client, admin.prefix).login("plain-user", "Plain-pw1").as_prefix(FABRIC)
