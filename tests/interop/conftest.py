"""Fixtures the interop tests share: SDK peers (C and Go), the ``ziti`` binary."""

from tests.edge.conftest import peers  # noqa: F401 - fixture
from tests.edge.test_go_sdk import go, gopeer  # noqa: F401 - fixtures
from tests.interop.test_ziti_cli import ziti_bin  # noqa: F401 - fixture
