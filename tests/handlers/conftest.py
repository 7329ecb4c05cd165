"""The handler tests build their networks with the tests' one builder (``tests/builders.py``)."""

import pytest

from tests.builders import Net


@pytest.fixture
def net(bare):
    return Net(bare)
