"""Host prices (bounds/host_prices.py): the least host time of a group's accelerator work never exceeds a subset's,
and the most work within a time never falls below one's; both against every subset of small groups."""
from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.host_prices import host_prices

GROUPS = 3


@st.composite
def groups(draw):
    n = draw(st.integers(0, 7))
    group = draw(st.lists(st.integers(-1, GROUPS - 1), min_size=n, max_size=n))
    acc = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=n, max_size=n))
    host = draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 4.0, math.inf]), min_size=n, max_size=n))
    return np.array(group, dtype=np.int64), np.array(acc), np.array(host)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(groups())
def test_prices_never_exceed_a_subset_and_the_most_never_falls_below_one(drawn):
    group, acc, host = drawn
    prices = host_prices(group, GROUPS, acc, host)
    for g in range(GROUPS):
        ops = np.flatnonzero(group == g).tolist()
        for size in range(len(ops) + 1):
            for chosen in itertools.combinations(ops, size):
                work, time = float(acc[list(chosen)].sum()), float(host[list(chosen)].sum())
                assert prices.time_for(g, work) <= time + 1e-9
                if math.isfinite(time):
                    assert prices.work_within(g, time) >= work - 1e-9
        assert prices.work_within(g, -1.0) == -math.inf


def test_each_op_at_its_own_ratio_not_the_least():
    # one op twice as fast on the host, one nine times slower: holding both costs 9.5, where the least ratio
    # over the ops would price their 2 units of work at 1
    prices = host_prices(np.array([0, 0]), 1, np.array([1.0, 1.0]), np.array([0.5, 9.0]))
    assert prices.time_for(0, 2.0) == 9.5
    assert prices.time_for(0, 1.0) == 0.5
    assert prices.work_within(0, 5.0) == 1.5
    assert prices.time_for(0, 2.5) == math.inf
