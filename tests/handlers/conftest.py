"""The handler tests build their networks with the policy tests' builder (``tests/policy/conftest.py``)."""

from tests.policy.conftest import Net, net  # noqa: F401
