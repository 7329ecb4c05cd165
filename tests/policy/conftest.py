"""The policy tests build their networks with the tests' one builder (``tests/builders.py``)."""

from __future__ import annotations

import pytest

from tests.builders import Net


@pytest.fixture
def net(bare):
    return Net(bare)
