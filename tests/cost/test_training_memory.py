"""Memory per schedule (weights + optimizer state, stashed activations per micro-batch in flight,
recomputation) and GPipe's fill and drain for finite micro-batches, in the cost model, the
problem terms, the pipeline planner and the simulator."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Memory
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.pipeline import pipeline
from placement_dsl.objectives import GPipe, PipeDream
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.simulate import analytic_time_per_sample, simulate
from placement_dsl.training import TrainingMemorySpec, flow_shop
from placement_dsl.training_terms import Replicate, TrainingMemory


def training_chain(k: int, work: float = 1.0, out: float = 1.0, param: float = 1.0) -> Graph:
    ops = [Op(name=f"f{i}", work=work, out_bytes=out, param_bytes=param, group=f"f{i}") for i in range(k)]
    ops += [Op(name=f"b{i}", work=2 * work, out_bytes=out, backward=True, group=f"f{i}") for i in range(k)]
    edges = [(f"f{i}", f"f{i + 1}") for i in range(k - 1)] + [(f"f{k - 1}", f"b{k - 1}")]
    edges += [(f"b{i + 1}", f"b{i}") for i in range(k - 1)]
    return Graph(ops, edges)


# ---------------------------------------------------------------------------- the formula
def test_adam_mixed_precision_is_eight_bytes_per_weight_byte():
    spec = TrainingMemorySpec()
    assert spec.state_factor == 8.0 and TrainingMemorySpec(weight_bytes=4.0).state_factor == 4.0


def test_one_f_one_b_stashes_k_minus_s_and_gpipe_all_m():
    g, c = training_chain(4), Cluster.stages(4)
    p = Placement(g, c, [0, 1, 2, 3, 0, 1, 2, 3])
    for spec, counts in ((TrainingMemorySpec("1f1b"), [4, 3, 2, 1]), (TrainingMemorySpec("gpipe", 6), [6] * 4),
                         (TrainingMemorySpec("1f1b", microbatches=2), [2, 2, 2, 1])):
        rows = evaluate(p, CostModel(training_memory=spec)).devices
        stash = [1 + (0 if s == 0 else 1) for s in range(4)]  # own output + stage input
        want = [8 * 1 + n * a for n, a in zip(counts, stash)]
        assert [r.memory_used for r in rows] == pytest.approx(want)


def test_recompute_stashes_inputs_and_one_microbatch():
    g, c = training_chain(2, out=3.0), Cluster.stages(2)
    p = Placement(g, c, [0, 1, 0, 1])
    spec = TrainingMemorySpec("gpipe", 5, recompute=True)
    rows = evaluate(p, CostModel(training_memory=spec)).devices
    assert rows[1].memory_used == pytest.approx(8 * 1 + 5 * 3 + 3 + 3)  # state + 5 inputs + one rebuild
    assert rows[0].memory_used == pytest.approx(8 * 1 + 0 + 3 + 0)


def test_replicas_share_the_microbatches_in_flight():
    g, c = training_chain(2), Cluster.stages(3)
    p = Placement(g, c, [0, 2, 0, 2], replicas=[2, 1, 1])
    rows = evaluate(p, CostModel(training_memory=TrainingMemorySpec("gpipe", 5))).devices
    assert rows[0].memory_used == rows[1].memory_used == pytest.approx(8 + math.ceil(5 / 2) * 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"schedule": "zb"}, "unknown schedule"), ({"schedule": "gpipe"}, "give microbatches"),
    ({"microbatches": 0}, "microbatches must be"), ({"optimizer_bytes": -1.0}, "optimizer_bytes"),
])
def test_spec_errors_name_the_field(kwargs, message):
    with pytest.raises(SpecError, match=message):
        TrainingMemory(**kwargs)


# ---------------------------------------------------------------------------- terms and problems
def test_training_memory_term_reaches_the_cost_model_and_binds():
    g = training_chain(4, param=1.0)
    problem = Problem(g, Cluster.stages(4, memory=11.0), PipeDream(), [TrainingMemory("1f1b")])
    model = problem.cost_model()
    assert model.training_memory == TrainingMemorySpec("1f1b") and "memory" in model.require
    even = Placement(problem.graph, problem.cluster, [0, 1, 2, 3, 0, 1, 2, 3])
    assert problem.violations(even)  # stage 0: 8 + 4 * 1 > 11 under 1F1B
    assert Problem(g, problem.cluster, PipeDream(), [Memory()]).is_valid(even)
    with pytest.raises(SpecError, match="no backward pass"):
        Problem(Graph([Op(name="a", work=1)]), Cluster.stages(1), PipeDream(), [TrainingMemory()])


def test_gpipe_microbatches_reach_the_cost_model_and_replicate_checks_counts():
    problem = Problem(training_chain(2), Cluster.stages(3), GPipe(microbatches=4), [Replicate(2)])
    assert problem.cost_model().microbatches == 4
    p = Placement(problem.graph, problem.cluster, [0, 2, 0, 2], replicas=[2, 1, 1])
    assert problem.is_valid(p) and Replicate(1).check(p) != []
    with pytest.raises(SpecError, match="microbatches"):
        GPipe(microbatches=0)


# ---------------------------------------------------------------------------- the pipeline planner
def _brute_force(g: Graph, c: Cluster, model: CostModel) -> float:
    """Best valid contiguous chain split (no replication) by enumeration of cut points and devices."""
    k = g.n // 2
    best = math.inf
    for cuts in itertools.chain.from_iterable(itertools.combinations(range(1, k), r) for r in range(c.size)):
        bounds = [0, *cuts, k]
        stage = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        ev = evaluate(Placement(g, c, np.concatenate([stage, stage])), model)
        if ev.valid:
            best = min(best, ev.objective)
    return best


@pytest.mark.parametrize("spec, capacity, stages", [
    (TrainingMemorySpec("1f1b"), 22.0, 4),  # a two-layer stage fits at positions 2 and 3 only
    (TrainingMemorySpec("gpipe", 3), 22.0, 5),  # ... at position 0 only (no input to stash)
    (TrainingMemorySpec("1f1b", recompute=True), 19.0, 5),
])
def test_pipeline_planner_respects_memory_per_schedule_exactly(spec, capacity, stages):
    g = training_chain(6, param=1.0)
    c = Cluster.stages(stages, memory=capacity)
    model = CostModel.named("pipedream", training_memory=spec)
    r = pipeline(g, c, model=model, replication=False)
    assert evaluate(r.placement, model).valid and r.objective == pytest.approx(_brute_force(g, c, model))
    plain = evaluate(r.placement.with_replicas(None), CostModel.named("pipedream", training_memory=None))
    assert plain.valid


def test_one_f_one_b_memory_changes_the_optimum():
    g, c = training_chain(6, param=1.0), Cluster.stages(4, memory=22.0)
    model = CostModel.named("pipedream", training_memory=TrainingMemorySpec("1f1b"))
    assert pipeline(g, c, model=model, replication=False).objective > pipeline(
        g, c, model=CostModel.named("pipedream"), replication=False).objective


def test_memory_that_fits_nowhere_is_infeasible():
    model = CostModel.named("pipedream", training_memory=TrainingMemorySpec("gpipe", 64))
    with pytest.raises(InfeasibleError, match="no pipeline"):
        pipeline(training_chain(3), Cluster.stages(2, memory=20.0), model=model)


def _brute_force_on_devices(g: Graph, c: Cluster, model: CostModel) -> float:
    """Best valid chain split over every choice of cut points and increasing devices."""
    k, best = g.n // 2, math.inf
    for n_stages in range(1, min(k, c.size) + 1):
        for cuts in itertools.combinations(range(1, k), n_stages - 1):
            sizes = np.diff([0, *cuts, k])
            for devices in itertools.combinations(range(c.size), n_stages):
                stage = np.repeat(np.array(devices), sizes)
                ev = evaluate(Placement(g, c, np.concatenate([stage, stage])), model)
                if ev.valid:
                    best = min(best, ev.objective)
    return best


@pytest.mark.parametrize("capacity", [26.0, 28.0, 30.0, 32.0])  # infeasible, binding (11 > 8), free
def test_one_f_one_b_memory_across_servers_is_exact(capacity):
    g = training_chain(6, param=1.0, out=2.0)
    c = Cluster.hierarchical(2, 2, intra=4.0, inter=1.0, memory=capacity)
    model = CostModel.named("pipedream", training_memory=TrainingMemorySpec("1f1b"))
    best = _brute_force_on_devices(g, c, model)
    if not math.isfinite(best):
        with pytest.raises(InfeasibleError):
            pipeline(g, c, model=model)
        return
    r = pipeline(g, c, model=model)
    assert r.objective == pytest.approx(best) == pytest.approx(r.info["dp_value"])


# ---------------------------------------------------------------------------- GPipe fill and drain
@pytest.mark.parametrize("k, m", [(2, 1), (4, 4), (4, 16), (3, 7)])
def test_gpipe_bubble_on_equal_stages(k, m):
    g = training_chain(k, out=0.0)
    p = Placement(g, Cluster.stages(k), np.tile(np.arange(k), 2))
    steady = evaluate(p, "gpipe").objective
    finite = evaluate(p, CostModel.named("gpipe", microbatches=m)).objective
    assert finite == pytest.approx(steady * (m + k - 1) / m)  # bubble (k-1)/(m+k-1)
    assert simulate(p, "gpipe", m).time_per_sample == pytest.approx(finite)


def test_gpipe_fill_and_drain_matches_the_simulator_on_uneven_replicated_stages():
    g = training_chain(5, work=1.0, out=2.0)
    g = g.replace(ops=[op.model_copy(update={"work": {"accelerator": 1.0 + i % 3}}) for i, op in enumerate(g.ops)])
    p = Placement(g, Cluster.stages(4), [0, 0, 1, 2, 2, 0, 0, 1, 2, 2], replicas=[1, 1, 2, 1])
    for m in (1, 3, 10, 40):
        assert analytic_time_per_sample(p, "gpipe", microbatches=m) == pytest.approx(
            simulate(p, "gpipe", m).time_per_sample)
    assert analytic_time_per_sample(p, "gpipe", microbatches=10**6) == pytest.approx(
        analytic_time_per_sample(p, "gpipe"), rel=1e-4)


def test_flow_shop_takes_the_slowest_unit_on_the_worst_path():
    assert flow_shop(np.array([1.0, 5.0, 2.0]), [[], [0], [0]], 4) == pytest.approx(1 + 5 + 3 * 5)
    assert flow_shop(np.array([]), [], 3) == 0.0


# ---------------------------------------------------------------------------- GPipe-optimal splits
@pytest.mark.parametrize("works", [[3, 1, 4, 1, 5, 9], [2, 7, 1, 8, 2, 8], [1, 1, 1, 6, 1, 1]])
def test_gpipe_split_is_the_brute_force_gpipe_optimum(works):
    from placement_dsl.heuristics.gpipe_split import gpipe_split

    ops = [Op(name=f"f{i}", work=w, out_bytes=1.0, group=f"f{i}") for i, w in enumerate(works)]
    ops += [Op(name=f"b{i}", work=(i % 3) * w + 1, out_bytes=2.0, backward=True, group=f"f{i}")
            for i, w in enumerate(works)]
    k = len(works)
    edges = [(f"f{i}", f"f{i + 1}") for i in range(k - 1)] + [(f"f{k - 1}", f"b{k - 1}")]
    g = Graph(ops, edges + [(f"b{i + 1}", f"b{i}") for i in range(k - 1)])
    c, model = Cluster.stages(3), CostModel.named("gpipe")
    r = gpipe_split(g, c, model=model)
    assert r.objective == pytest.approx(_brute_force(g, c, model)) == pytest.approx(r.info["dp_value"])
    assert r.bound == r.objective
    assert r.objective <= evaluate(pipeline(g, c, model=model, replication=False).placement, model).objective + 1e-9


def test_gpipe_split_refuses_what_it_does_not_model():
    from placement_dsl.heuristics.gpipe_split import gpipe_split

    with pytest.raises(SpecError, match="flat clusters only"):
        gpipe_split(training_chain(3), Cluster.hierarchical(2, 1, intra=1.0, inter=1.0))
    with pytest.raises(SpecError, match="schedule 'gpipe'"):
        gpipe_split(training_chain(3), Cluster.stages(2),
                    model=CostModel.named("gpipe", training_memory=TrainingMemorySpec("1f1b")))


# ---------------------------------------------------------------------------- bounds stay bounds
def test_replication_widens_so_relaxations_refuse_and_certify_bounds_with_replicas():
    from placement_dsl.certify import certify
    from placement_dsl.formulations import FORMULATIONS, Kind
    from placement_dsl.testing import brute_force, replicated_chain

    problem, optimum = replicated_chain()
    assert brute_force(problem)[0] == pytest.approx(optimum)  # brute force enumerates replica counts
    for form in FORMULATIONS.values():
        if form.kind is Kind.RELAXATION:
            assert form.accepts(problem) is not None
    cert = certify(problem, budget=10, stop_at_gap=False)  # the levels that model replicas (App. C.2) bound it
    bounded = {row.level for row in cert.levels if row.bound is not None}
    assert bounded == {"simple", "dp", "throughput"} and cert.bound == pytest.approx(optimum)
    assert all(row.bound <= optimum * (1 + 1e-9) for row in cert.levels if row.bound is not None)


# ---------------------------------------------------------------------------- the IP
@pytest.mark.parametrize("spec", [TrainingMemory("1f1b"), TrainingMemory("gpipe", 3),
                                  TrainingMemory("1f1b", recompute=True), TrainingMemory("gpipe", 2, recompute=True)])
def test_throughput_ip_counts_memory_per_schedule_like_brute_force(spec):
    from placement_dsl.constraints import Contiguous
    from placement_dsl.solve import solve
    from placement_dsl.testing import brute_force

    rng = np.random.default_rng(7)
    binding = 0
    for _ in range(3):
        g = training_chain(5, out=1.0)
        g = g.replace(ops=[op.model_copy(update={"work": {"accelerator": float(rng.integers(1, 6))},
                                                 "param_bytes": float(rng.integers(0, 3))}) for op in g.ops])
        plain_value, plain = brute_force(Problem(g, Cluster.stages(3), PipeDream(), [Contiguous()]))
        need = max(r.memory_used for r in evaluate(plain, CostModel(training_memory=spec.spec())).devices)
        for capacity in (need - 0.5, need + 0.5):  # just below what the unconstrained optimum needs, and above
            problem = Problem(g, Cluster.stages(3, memory=capacity), PipeDream(), [Contiguous(), spec])
            try:
                best = brute_force(problem)[0]
            except InfeasibleError:
                continue
            result = solve(problem, formulation="throughput", time_limit=30)
            assert result.objective == pytest.approx(best, rel=1e-6)
            binding += best > plain_value + 1e-9
    assert binding  # some capacity changes the optimum


def test_ip_refuses_memory_per_schedule_with_replicas():
    from placement_dsl.formulations import get

    problem = Problem(training_chain(2), Cluster.stages(3), PipeDream(), [TrainingMemory(), Replicate(2)])
    assert "replicas share the micro-batches" in get("throughput-replicated").accepts(problem)
