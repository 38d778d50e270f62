"""Conformance over the heuristics', certify levels' and formats' registries, on tiny instances.

Every registered heuristic, level and format is covered here without a test of its own
(:func:`~placement_dsl.conformance.check_heuristic`, :func:`~placement_dsl.conformance.check_level`,
:func:`~placement_dsl.conformance.check_format`): a new one is checked by registering it.
"""
from __future__ import annotations

import pytest

from placement_dsl import testing
from placement_dsl.certificate import LevelStatus
from placement_dsl.cluster import Cluster, Device
from placement_dsl.conformance import check_format, check_heuristic, check_level, class_optimum, writable
from placement_dsl.constraints import Contiguous, DagOrder, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import registry
from placement_dsl.heuristics.base import HeuristicResult
from placement_dsl.io import formats
from placement_dsl.levels import base as levels
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement, PlacementClass
from placement_dsl.problem import Problem
from placement_dsl.workload import Workload

TIME_LIMIT = 2.0

# ---------------------------------------------------------------------------- heuristics
BY_GOAL = {"max_load": ("diamond_noncontiguous", "contiguity_binds"), "cost_model": ("diamond_noncontiguous",),
           "memory_fill": ("memory_binds",), "latency": ("latency_diamond",), "makespan": ("makespan_fork",),
           "gpipe": ("training_gpipe",)}
"""The tiny instances a method is run on, by what it optimizes (``registry.Heuristic.optimizes``)."""


def servers() -> Problem:
    """A chain on two servers of one accelerator each, contiguous: the cluster ``dp-servers`` needs."""
    return Problem(testing.chain_graph([2, 3, 1, 2]), Cluster.hierarchical(2, 1, intra=2.0, inter=1.0), Throughput(),
                   [Contiguous()])


OWN_INSTANCES = {"dp-servers": servers}
"""Methods that need an instance of their own, with the reason: ``dp-servers`` refuses a cluster without servers."""


def _problems(name: str) -> list[tuple[str, Problem]]:
    if name in OWN_INSTANCES:
        return [(name, OWN_INSTANCES[name]())]
    goal = registry.get(name).optimizes
    return [(inst, testing.INSTANCES[inst]()[0]) for inst in BY_GOAL[goal]]


HEURISTIC_CASES = [(name, inst) for name in sorted(registry.load()) for inst, _ in _problems(name)]


def test_every_heuristic_has_an_instance():
    """A method optimizing something new needs a row in BY_GOAL (else it would go unchecked)."""
    goals = {h.optimizes for h in registry.load().values()}
    assert goals <= set(BY_GOAL), sorted(goals - set(BY_GOAL))


INVALID: dict[tuple[str, str], str] = {}
"""Methods whose placement on an instance breaks the problem's terms, with the reason (the other checks still
hold for them; a method that comes to respect the terms fails the test until its row is removed)."""


@pytest.mark.parametrize("name, instance", HEURISTIC_CASES)
def test_every_heuristic_conforms(name, instance):
    """Well-formed, the objective the cost model's, claims true by brute force, and a valid placement (or the
    reason in INVALID why not)."""
    problem = dict(_problems(name))[instance]
    found = check_heuristic(name, problem, time_limit=TIME_LIMIT, valid=True)
    invalid = [m for m in found if "is not valid for" in m]
    assert not set(found) - set(invalid), found
    if (name, instance) in INVALID:
        assert invalid, f"{name} now places {instance} validly: drop its row from INVALID"
    else:
        assert not invalid, invalid


def test_a_false_exactness_claim_is_caught(monkeypatch):
    """A method that claims exactness among contiguous splits for a split brute force beats is a finding."""
    problem, _ = testing.contiguity_binds()

    def liar(graph, cluster, *, model=None, seed=None, time_limit=None):
        placement = Placement(graph, cluster, [0, 0, 0, 0])  # everything on one device: 12, the optimum is 7.25
        ev = problem.evaluate(placement)
        return HeuristicResult("liar", placement, ev.objective, 0.0, bound=ev.objective, exact_among="contiguous")

    monkeypatch.setitem(registry.HEURISTICS, "liar", registry.Heuristic("liar", liar, "max_load", __name__))
    found = check_heuristic("liar", problem)
    assert any("above the brute-force optimum 7.25" in m for m in found), found
    assert any("claims exact among contiguous" in m for m in found), found


def test_a_misreported_objective_is_caught(monkeypatch):
    problem, _ = testing.contiguity_binds()

    def off(graph, cluster, *, model=None, seed=None, time_limit=None):
        placement = Placement(graph, cluster, [0, 0, 1, 1])
        return HeuristicResult("off", placement, problem.evaluate(placement).objective * (1 + 1e-7), 0.0)

    monkeypatch.setitem(registry.HEURISTICS, "off", registry.Heuristic("off", off, "max_load", __name__))
    assert any("the cost model says" in m for m in check_heuristic("off", problem))


def test_a_class_optimum_is_over_the_class_the_solve_tests_a_start_by():
    """Brute force over a class keeps the placements ``Problem.class_of`` puts in it: contiguity binds as before,
    and the DP's class holds a split whose edge runs from device 1 back to device 0 (acyclic, numbered against
    the pipeline), which ``DagOrder`` by device numbers refused (10.1 instead of 1.1)."""
    problem, optimum = testing.contiguity_binds()
    unrestricted = Problem(problem.source_graph, problem.cluster, problem.objective, [])
    assert class_optimum(unrestricted, PlacementClass.CONTIGUOUS) == pytest.approx(optimum)
    assert testing.optimum(unrestricted) == pytest.approx(6.5)
    ops = [Op(name="a", work={"x": 1.0, "y": 10.0}, out_bytes=0.1), Op(name="b", work={"x": 10.0, "y": 1.0})]
    cluster = Cluster([Device(name="d0", kind="y"), Device(name="d1", kind="x")])
    backwards = Problem(Graph(ops, [("a", "b")]), cluster, Throughput(), [])
    assert class_optimum(backwards, PlacementClass.DP) == pytest.approx(1.1)
    assert testing.optimum(Problem(backwards.source_graph, cluster, Throughput(), [Contiguous(), DagOrder()])) \
        == pytest.approx(10.1)


def test_the_levels_checked_on_one_problem_share_its_brute_force(monkeypatch):
    from placement_dsl import brute

    calls = []
    monkeypatch.setattr(brute, "optimum", lambda problem, among: calls.append(among) or 6.0)
    problem = Problem(testing.chain()[0].source_graph, Cluster.accelerators(2), Throughput(), [Memory()])
    class_optimum.cache_clear()
    try:
        for level in ("simple", "capacity"):
            check_level(level, problem)
    finally:
        class_optimum.cache_clear()  # the made-up optimum stays out of later tests
    assert calls == [PlacementClass.ALL]


# ---------------------------------------------------------------------------- levels
def host_between() -> tuple[Problem, float]:
    """:func:`~placement_dsl.testing.memory_leaves_the_cpu` with the CPU between the accelerators, contiguous: the
    host's share (its ops beyond what a prefix and a suffix in the accelerators' memory hold) binds."""
    p, _ = testing.memory_leaves_the_cpu()
    acc0, acc1, cpu = p.cluster.devices
    q = Problem(p.source_graph, Cluster([acc0, cpu, acc1]), p.objective, [Memory(), Contiguous()])
    return q, testing.optimum(q)


LEVEL_INSTANCES = ("chain", "diamond", "dag_order_binds", "contiguity_binds", "diamond_noncontiguous", "latency_diamond",
                   "makespan_fork", "memory_leaves_the_cpu", "host_between")
"""One to three tiny instances per family: MTPP (chain, diamond, one where DAG order binds, one where the accelerators'
memory leaves ops to a CPU last, one to a CPU between them), throughput contiguous and not, latency, makespan."""
LEVEL_PROBLEMS = {**testing.INSTANCES, "memory_leaves_the_cpu": testing.memory_leaves_the_cpu,
                  "host_between": host_between}

SLOW_LEVELS: dict[str, str] = {}
"""Levels left out, with the reason (none: every level runs within its budget on these instances)."""

LEVEL_CASES = [(name, inst) for name in levels.load() for inst in LEVEL_INSTANCES
               if levels.LEVELS[name].accepts(LEVEL_PROBLEMS[inst]()[0]) is None]


def test_every_level_is_checked_somewhere():
    """Each registered level accepts at least one of the instances (a new family needs an instance here)."""
    checked = {name for name, _ in LEVEL_CASES} | set(SLOW_LEVELS)
    assert checked == set(levels.load()), sorted(set(levels.load()) - checked)


@pytest.mark.parametrize("name, instance", LEVEL_CASES)
def test_every_level_bounds_the_optimum(name, instance):
    if name in SLOW_LEVELS:
        pytest.skip(SLOW_LEVELS[name])
    problem, optimum = LEVEL_PROBLEMS[instance]()
    assert not check_level(name, problem, optimum, budget=3.0)



def test_a_bound_above_the_optimum_is_caught(monkeypatch):
    """A level proving more than brute force allows over the class it names is a finding."""
    problem, optimum = testing.contiguity_binds()

    def over(scope):
        def run_level(run, seconds):
            return optimum + 1.0, LevelStatus.OPTIMAL, "too high", scope
        return run_level

    monkeypatch.setitem(levels.LEVELS, "too-high", levels.Level("too-high", over(PlacementClass.ALL), rank=1.0))
    found = check_level("too-high", problem, optimum, budget=1.0)
    assert any(m.startswith("level too-high:") and "8.25" in m and "above the" in m and "7.25" in m
               for m in found), found

# ---------------------------------------------------------------------------- formats
def small_workload() -> Workload:
    """Three ops (one CPU-only, one with parameters, two colocated) on two accelerators with memory and a CPU."""
    ops = [Op(name="a", work={"accelerator": 1.0, "cpu": 3.0}, out_bytes=2.0, param_bytes=1.0),
           Op(name="b", work={"cpu": 4.0}, out_bytes=1.0, group="pair"),
           Op(name="c", work={"accelerator": 2.0, "cpu": 5.0}, activation_bytes=0.5, group="pair")]
    graph = Graph(ops, [("a", "b"), ("a", "c"), ("b", "c")], name="small")
    return Workload(graph, Cluster.accelerators(2, memory=8.0, cpus=1))


READ_ONLY = {"moirai": "MOIRAI's spreadsheets (.xls/.xlsx) are read for their benchmarks; nothing writes them",
             "onnx": "an ONNX model is imported, not written: its tensors carry no cluster",
             "pipedream": "PipeDream's profiles are read (their graph.txt); nothing writes them",
             "torch": "a MODULE:FACTORY name, not a file"}
"""Formats :func:`~placement_dsl.io.workload.save_workload` does not write, with the reason."""

FORMATS = sorted(formats.load())


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_round_trips(name, tmp_path):
    reason = writable(name)
    if name in READ_ONLY:  # the writer refuses it with a reason: nothing else to round-trip
        assert reason is not None, f"{name} is written now: drop it from READ_ONLY"
        return
    assert reason is None, f"{name} has no writer ({reason}) and no reason in READ_ONLY"
    assert not check_format(name, small_workload(), tmp_path)


def test_a_lossy_writer_is_caught(tmp_path, monkeypatch):
    """A writer that drops a field (the CPU's work) is a finding."""
    from placement_dsl.io import workload as io_workload

    real = io_workload.workload_to_dict

    def lossy(w):
        data = real(w)
        data["graph"]["ops"][0]["work"].pop("cpu", None)
        return data

    monkeypatch.setattr(io_workload, "workload_to_dict", lossy)
    assert any("graph read back differs" in m for m in check_format("native", small_workload(), tmp_path))

