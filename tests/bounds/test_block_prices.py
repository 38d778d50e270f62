"""The prices of the blocks between cut ops: a device inside a block pays at least the block's inner price."""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings

from placement_dsl.bounds.block_cuts import block_prices, segments
from placement_dsl.structure import cut_ops
from tests.bounds.headed import headed_chains


@settings(max_examples=60, deadline=None, derandomize=True)
@given(headed_chains())
def test_a_device_inside_a_block_pays_at_least_its_inner_price(problem):
    """Every non-empty convex set of a block's ops (a device holding no cut op) receives and sends at least the
    block's inner price, the least inputs of an op of it plus the least output."""
    g = problem.graph
    cuts = cut_ops(g)
    seg = segments(g, cuts)
    inner = block_prices(g, cuts, g.out_bytes, np.ones(g.n)).inner
    reach = np.eye(g.n, dtype=bool)
    for v in g.topo[::-1]:
        for w in g.successors(v):
            reach[v] |= reach[w]
    for s in range(-1, 2 * len(cuts), 2):
        ops = np.flatnonzero(seg == s).tolist()
        for size in range(1, len(ops) + 1):
            for held in map(set, itertools.combinations(ops, size)):
                if any(reach[a, c] and reach[c, b] for a in held for b in held for c in range(g.n) if c not in held):
                    continue  # not convex
                sent = {u for u, v in zip(g.src, g.dst) if u in held and v not in held}
                got = {u for u, v in zip(g.src, g.dst) if u not in held and v in held}
                price = sum(g.out_bytes[u] for u in sent | got)
                assert inner[(s + 1) // 2] <= price + 1e-9


def test_past_the_envelope_budget_a_block_is_priced_by_its_least_cut(monkeypatch):
    from placement_dsl import zoo
    from placement_dsl.bounds import block_cuts

    g = zoo.gpt3(layers=2, hidden=256, heads=4, vocab=1024).graph
    cuts = cut_ops(g)
    work = np.ones(g.n)
    full = block_prices(g, cuts, g.out_bytes, work)
    monkeypatch.setattr(block_cuts, "ENVELOPE_BUDGET", 0)
    least = block_prices(g, cuts, g.out_bytes, work)
    enter, leave = block_cuts.block_costs(g, cuts, g.out_bytes)
    assert (full.leave_slope != 0).any()  # attention's blocks: the more of the heads held, the less sent
    assert least.leave_slope.shape[1] == 1 and (least.leave_slope == 0).all()
    assert least.leave_level[1:, 0].tolist() == leave.tolist()
    assert least.enter_level[:-1, 0].tolist() == enter.tolist()
