"""Minimum cuts and their envelope: every line lies under every held set's price, and the flow's value is the least
cut, by enumeration on random networks."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.parametric_cut import cut_envelope, min_cut


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_the_envelope_lies_under_every_held_set(data):
    """A random network on a few work-carrying nodes: every source side's price is on or above every line."""
    nodes = data.draw(st.integers(1, 5))
    inner = list(range(2, 2 + nodes))
    cap = st.integers(0, 4).map(float)
    arcs = [(0, v, data.draw(cap)) for v in inner] + [(v, 1, data.draw(cap)) for v in inner]
    arcs += [(u, v, data.draw(st.sampled_from([0.0, 1.0, 3.0, np.inf]))) for u in inner for v in inner if u != v]
    works = {v: data.draw(st.integers(0, 3).map(float)) for v in inner}
    on_source = data.draw(st.booleans())
    lines = cut_envelope(arcs, works, on_source)
    for side in itertools.product([False, True], repeat=nodes):
        source = {0} | {v for v, s in zip(inner, side) if s}
        price = sum(c for u, v, c in arcs if u in source and v not in source)
        held = sum(w for v, w in works.items() if (v in source) == on_source)
        assert all(g + lam * held <= price + 1e-9 for lam, g in lines)
    assert min_cut(arcs)[0] == pytest.approx(min(
        sum(c for u, v, c in arcs if u in src and v not in src)
        for src in ({0} | {v for v, s in zip(inner, side) if s} for side in itertools.product([0, 1], repeat=nodes))))
