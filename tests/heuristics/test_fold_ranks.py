"""Under ZBV the DP's answer is balanced by ranks (stage k and 2p - 1 - k on rank k), not by stages, and the V
always folds it (an even number of stages); checked against brute force on tiny chains whose ranks bind."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import fold_ranks
from placement_dsl.heuristics.base import run
from placement_dsl.placement import Placement
from placement_dsl.simulate import simulate
from placement_dsl.zoo.training import with_backward


def training(works, edges, out_bytes=0.0, order=None) -> Graph:
    """Layers ``l0 ...`` with their gradients; ``order``: the layers' order in the op list (default: by number)."""
    order = range(len(works)) if order is None else order
    ops = [Op(name=f"l{i}", work=float(works[i]), out_bytes=float(out_bytes), param_bytes=1.0) for i in order]
    ops, edges = with_backward(ops, [(f"l{a}", f"l{b}") for a, b in edges])
    return Graph(ops, edges)


def chain(works, out_bytes=0.0) -> Graph:
    return training(works, [(i, i + 1) for i in range(len(works) - 1)], out_bytes)


def on_stages(g: Graph, forward_device: list[int], k: int = 4) -> Placement:
    """Forward op ``i`` on ``forward_device[i]``, each gradient with its op (``with_backward``'s order)."""
    return Placement(g, Cluster.stages(k), forward_device + forward_device[::-1])


def brute_force(g: Graph, n: int, model: CostModel) -> float:
    """The best contiguous split of the chain into 2 or 4 stages (stage k on device k), by the cost model."""
    best = np.inf
    for h in (2, 4):
        for cuts in itertools.combinations(range(1, n), h - 1):
            bounds = (0, *cuts, n)
            ev = evaluate(on_stages(g, [s for s in range(h) for _ in range(bounds[s + 1] - bounds[s])]), model)
            best = min(best, ev.objective if ev.valid else np.inf)
    return float(best)


def stage_balanced(monkeypatch, g: Graph, model: CostModel):
    """The DP's split as it balances stages, before the ranks are balanced."""
    with monkeypatch.context() as m:
        m.setattr(fold_ranks, "rebalance", lambda con, stages, *args, **kw: stages)
        return run("dp", g, Cluster.stages(4), model=model, time_limit=5)


@settings(deadline=None, max_examples=25, derandomize=True)
@given(st.lists(st.integers(1, 5), min_size=4, max_size=7), st.integers(0, 2), st.sampled_from([None, 4, 8]))
def test_the_dp_under_zbv_is_the_best_split_by_ranks(works, out_bytes, m):
    """On chains, the DP's answer under zbv is the best contiguous split into 2 or 4 stages by the ranks' loads (the
    cost model, which is the simulator's step), valid, and claims no bound."""
    g = chain(works, out_bytes)
    model = CostModel.named("zbv", **({} if m is None else {"microbatches": m}))
    found = run("dp", g, Cluster.stages(4), model=model, time_limit=5)
    assert evaluate(found.placement, model).valid
    assert found.objective == pytest.approx(brute_force(g, len(works), model))
    assert found.bound is None and found.exact_among is None
    if m is not None:
        assert found.objective == pytest.approx(simulate(found.placement, "zbv", m).time_per_sample)


def test_hand_instance_where_the_stages_balance_and_the_ranks_do_not(monkeypatch):
    """Works 4 1 3 5 4 4 3 (F + B = 3 w): the stage-balanced DP cuts 4 1 3 | 5 | 4 4 | 3, stages 24 15 24 9, and rank 1
    runs 15 + 24 = 39; the ranks' best is 4 1 | 3 | 5 4 | 4 3, stages 15 9 27 21, both ranks 36."""
    g, model = chain([4, 1, 3, 5, 4, 4, 3]), CostModel.named("zbv")
    assert stage_balanced(monkeypatch, g, model).objective == 39.0
    found = run("dp", g, Cluster.stages(4), model=model)
    assert found.objective == 36.0 == brute_force(g, 7, model)
    assert found.placement.assign[:7].tolist() == [0, 0, 1, 2, 2, 3, 3]


def test_a_split_of_three_stages_is_made_one_the_v_folds(monkeypatch):
    """Works 5 4 3 2: balancing stages, the DP may take 3 stages (5 | 4 | 3 2), which ZBV's V cannot fold (the cost
    model: infinite); by ranks it answers 5 | 4 | 3 | 2, ranks 15 + 6 and 12 + 9 = 21."""
    g, model = chain([5, 4, 3, 2]), CostModel.named("zbv")
    assert evaluate(on_stages(g, [0, 1, 2, 2]), model).objective == np.inf
    found = run("dp", g, Cluster.stages(4), model=model)
    assert found.objective == 21.0 and evaluate(found.placement, model).valid


def test_a_dag_is_rebalanced_by_moves_the_cost_model_scores(monkeypatch):
    """Off a path (two branches), the ranks are balanced by moving one node across a boundary at a time: never worse
    than the stage-balanced split, never better than the best assignment of the ops to the 4 devices."""
    g = training([2, 5, 1, 4, 3, 1], [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (4, 5)])
    model = CostModel.named("zbv")
    before = stage_balanced(monkeypatch, g, model).objective
    found = run("dp", g, Cluster.stages(4), model=model, time_limit=5)
    assert evaluate(found.placement, model).valid and found.objective <= before
    best = min((evaluate(on_stages(g, list(dev)), model) for dev in itertools.product(range(4), repeat=6)),
               key=lambda ev: ev.objective if ev.valid else np.inf)
    assert best.objective <= found.objective


def test_moves_keep_every_prefix_an_ideal():
    """Moves on the path 0 - 1 - 2 - 3 in stages [0 1] [2] [3]: 1 forward, 2 back (stage 1 would empty: no), 3 back;
    each stage keeps a node."""
    succ, pred = [[1], [2], [3], []], [[], [0], [1], [2]]
    stages = [np.array([0, 1]), np.array([2]), np.array([3])]
    got = sorted(tuple(tuple(s.tolist()) for s in c) for c in fold_ranks.moves(stages, succ, pred))
    assert got == [((0,), (1, 2), (3,))]


def test_a_rebalance_past_its_deadline_or_budget_keeps_the_start():
    """Past the deadline no split is scored beyond the start's, which is kept; with a budget of n calls, n are made."""
    import time

    from placement_dsl.heuristics.contract import contract

    g = chain([4, 1, 3, 5, 4, 4, 3])
    con = contract(g)
    calls = []

    def score(stages):
        calls.append(len(stages))
        return float(len(stages))

    start = [np.array([0, 1, 2]), np.array([3]), np.array([4, 5]), np.array([6])]
    assert fold_ranks.rebalance(con, start, score, 4, deadline=time.monotonic() - 1.0) is start
    assert len(calls) == 1
    calls.clear()
    fold_ranks.rebalance(con, start, score, 4, evaluations=3)
    assert len(calls) == 1 + 3


def test_the_dp_called_directly_claims_no_bound_under_zbv():
    """The DP's value is one stage's load; a split re-balanced by ranks certifies nothing, whoever calls it."""
    from placement_dsl.heuristics.ideals import dp

    g = training([2, 5, 1, 4, 3, 1], [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (4, 5)])
    found = dp(g, Cluster.stages(4), model=CostModel.named("zbv"))
    assert found.bound is None and found.exact_among is None
    assert dp(g, Cluster.stages(4), model=CostModel.named("pipedream")).bound is not None


def ideal_chains(n: int, edges: list[tuple[int, int]], devices: int = 4):
    """Every chain of ideals of the forward DAG with 2 or 4 stages, as the stage of each op (brute force)."""
    closed = [s for s in range(1 << n) if all(not (s >> b & 1) or s >> a & 1 for a, b in edges)]
    inner = [s for s in closed if 0 < s < (1 << n) - 1]
    for h in range(2, devices + 1, 2):
        for cuts in itertools.combinations(inner, h - 1):
            chain = [0, *cuts, (1 << n) - 1]
            if all(a & b == a and a != b for a, b in itertools.pairwise(chain)):
                yield [next(k for k in range(h) if chain[k + 1] >> i & 1) for i in range(n)]


@st.composite
def small_dags(draw):
    """A connected DAG of 4-6 layers (each has an earlier predecessor), random works, and the ops' order shuffled
    against the data flow: the stages' ops interleave in op order."""
    n = draw(st.integers(4, 6))
    edges = {(draw(st.integers(0, j - 1)), j) for j in range(1, n)}
    edges |= {e for e in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=4))
              if e[0] < e[1]}
    works = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    return works, sorted(edges), draw(st.integers(0, 2)), draw(st.permutations(range(n)))


@settings(deadline=None, max_examples=20, derandomize=True)
@given(small_dags(), st.sampled_from([None, 4]))
def test_the_dp_under_zbv_is_the_best_chain_of_ideals_on_small_dags(dag, m):
    """On small DAGs the DP's answer under zbv is the best split of its class (a chain of 2 or 4 ideals, stage k on
    device k) by the cost model, which scores every such split finite (a stage is one device's ops)."""
    works, edges, out_bytes, order = dag
    g = training(works, edges, out_bytes, order)
    model = CostModel.named("zbv", **({} if m is None else {"microbatches": m}))
    scores = [evaluate(on_stages(g, [dev[i] for i in order]), model) for dev in ideal_chains(len(works), edges)]
    assert all(ev.valid and np.isfinite(ev.objective) for ev in scores)
    found = run("dp", g, Cluster.stages(4), model=model, time_limit=5)
    assert found.objective == pytest.approx(min(ev.objective for ev in scores))
    if m is not None:
        assert found.objective == pytest.approx(simulate(found.placement, "zbv", m).time_per_sample)


def test_the_splits_of_ideals_are_the_dps_class():
    """The diamond 0 -> {1, 2} -> 3: ideals {}, 0, 01, 02, 012, 0123; its chains into 2 stages (3) and 4 (2)."""
    from placement_dsl.heuristics.contract import contract

    con = contract(training([1, 1, 1, 1], [(0, 1), (0, 2), (1, 3), (2, 3)]))
    got = fold_ranks.splits_of_ideals(con, 4)
    assert sorted(tuple(tuple(s.tolist()) for s in c) for c in got) == sorted(
        [((0,), (1, 2, 3)), ((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 1, 2), (3,)), ((0,), (1,), (2,), (3,)),
         ((0,), (2,), (1,), (3,))])
    assert fold_ranks.splits_of_ideals(con, 4, cap=3) is None
