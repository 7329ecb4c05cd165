"""Which terminator a dial tries first: precedence, then the service's terminator strategy.

Shared by the embedded router (its own terminators) and the control channel (a real router's
terminators): ``required`` terminators before ``default`` ones before ``failed`` ones; within a
precedence, ``random`` shuffles, ``weighted`` draws by inverse cost, and ``smartrouting``, ``ha``
and unknown strategies take the lowest effective cost first (a terminator's cost plus the
penalty its recent failed dials earned), equal costs in random order so they share the load.

``PENALTY`` is the one table of what a dial's outcome does to a terminator's penalty, and
``penalised`` applies it: both routers keep a penalty per terminator and call it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PRECEDENCE_RANK = {"required": 0, "default": 1, "failed": 2}

# what an outcome adds to a terminator's penalty (upstream's smartrouting costs): a dial the host
# did not answer in time, one it refused, one that succeeded (down to 0); an unhealthy report
# raises the penalty to at least its figure, a healthy one clears it
PENALTY = {"timeout": 50, "error": 20, "success": -10, "unhealthy": 100}


def penalised(penalty: int, outcome: str) -> int:
    """A terminator's penalty after ``outcome`` (a key of ``PENALTY``, or ``healthy``)."""
    if outcome == "healthy":
        return 0
    if outcome == "unhealthy":
        return max(penalty, PENALTY["unhealthy"])
    return max(0, penalty + PENALTY[outcome])


def order(items: list[T], strategy: str, precedence: Callable[[T], str], cost: Callable[[T], int]) -> list[T]:
    groups: dict[int, list[T]] = {}
    for t in items:
        groups.setdefault(PRECEDENCE_RANK.get(precedence(t), 1), []).append(t)
    out: list[T] = []
    for rank in sorted(groups):
        group = groups[rank]
        random.shuffle(group)   # equal costs share the load
        if strategy == "random":
            pass
        elif strategy == "weighted":
            group.sort(key=lambda t: random.random() ** (1.0 / (1.0 / (1 + cost(t)))))
        else:  # smartrouting, ha and unknown strategies: lowest effective cost first
            group.sort(key=cost)
        out.extend(group)
    return out
