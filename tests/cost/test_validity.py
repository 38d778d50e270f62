"""The structural checks of a placement (placement_dsl/validity.py): the quotient graph's cycle is found and named in
order, without networkx."""
from __future__ import annotations

from placement_dsl.validity import quotient_cycle


def test_a_cycle_is_named_in_order_from_the_least_device_that_reaches_it():
    assert quotient_cycle({(0, 1), (1, 2), (2, 0)}) == [0, 1, 2]
    assert quotient_cycle({(0, 1), (2, 3), (3, 2)}) == [2, 3]
    assert quotient_cycle({(0, 1), (1, 2), (0, 2)}) == []
    assert quotient_cycle(set()) == []
