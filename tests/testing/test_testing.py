"""The generators of placement_dsl.testing draw problems on which the structural constraints bind.

A property test is only as strong as its draws: a constraint that never changes the optimum
on them is never tested. The rates here are measured by brute force (optimum with the
constraint vs without it) on fixed seeds, so they are deterministic.
"""
from __future__ import annotations

import doctest
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from placement_dsl import brute, testing
from placement_dsl.constraints import Contiguous, DagOrder, Memory
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph
from placement_dsl.testing import (
    SHAPES,
    STRUCTURES,
    binding,
    binds,
    optimum,
    record_binding,
    structured_graph,
    structured_problem,
    structured_problems,
    without,
)

RATE_SEEDS = range(50)
MIN_RATE = 0.25  # measured: contiguity 36 %, DAG order 42 % on these seeds


def _rate(results: list[tuple[float, float]]) -> float:
    return sum(w > wo + 1e-9 * max(1.0, abs(wo)) for w, wo in results) / len(results)


def test_module_doctests():
    results = [doctest.testmod(module) for module in (testing, brute)]
    assert sum(r.attempted for r in results) >= 3 and all(r.failed == 0 for r in results)


# ---------------------------------------------------------------------------- binding rates
@pytest.mark.parametrize("structure", sorted(STRUCTURES))
def test_seeded_generator_binds_its_structure(structure):
    term = STRUCTURES[structure]
    results = [binding(structured_problem(seed, structure), term) for seed in RATE_SEEDS]
    assert all(math.isfinite(w) for w, _ in results), "every draw is feasible"
    rate = _rate(results)
    assert rate >= MIN_RATE, f"{term.__name__} changes the optimum in {rate:.0%} of {len(results)} draws"


def test_strategy_binds_under_given():
    """Counted through @given (derandomized): the strategy binds as often as its seeded generator."""
    seen: dict[str, list[bool]] = {name: [] for name in STRUCTURES}

    @settings(max_examples=30, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(structured_problems())
    def draw(problem):
        (term,) = {type(t) for t in problem.constraints}
        seen[next(n for n, t in STRUCTURES.items() if t is term)].append(record_binding(problem)[term.__name__])

    draw()
    for name, flags in seen.items():
        assert len(flags) >= 8, (name, len(flags))
        assert sum(flags) / len(flags) >= MIN_RATE, (name, f"{sum(flags)}/{len(flags)}")


# ---------------------------------------------------------------------------- what the generator draws
def test_draws_are_varied_and_never_on_one_device():
    problems = [structured_problem(seed) for seed in range(80)]
    assert all(p.cluster.size >= 2 for p in problems)
    assert {p.cluster.size for p in problems} == {2, 3}
    assert any(p.cluster.host.any() for p in problems) and not all(p.cluster.host.any() for p in problems)
    assert {p.graph.name.rstrip("0123456789") for p in problems} == set(SHAPES)
    assert {type(p.objective).__name__ for p in problems} == {"Throughput", "Bottleneck"}
    assert {p.objective.overlap for p in problems} == {"none", "half", "full"}
    assert {type(p.constraints[0]) for p in problems} == set(STRUCTURES.values())
    assert all(4 <= p.graph.n <= (5 if p.cluster.size == 3 else 6) for p in problems)
    for p in problems:  # transfers are cheap: no tensor costs more than the lightest op's work
        assert p.graph.out_bytes.max() <= 1.0 <= p.graph.work("accelerator").min()


@pytest.mark.parametrize("shape", SHAPES)
def test_shapes(shape):
    for seed in range(10):
        g = structured_graph(random.Random(seed), shape, 6)
        indeg = [len(g.predecessors(v)) for v in range(g.n)]
        outdeg = [len(g.successors(v)) for v in range(g.n)]
        assert isinstance(g, Graph) and g.n == 6
        if shape == "chain":
            assert g.m == 5 and max(outdeg) == 1
        elif shape == "skip":
            assert g.m > 5 and max(outdeg) >= 2  # a residual edge over the chain
        elif shape in ("diamond", "fork_join"):
            assert outdeg[0] >= 2 and indeg[5] >= 2 and indeg[0] == 0 and outdeg[5] == 0
            if shape == "fork_join":
                assert outdeg[0] == 4 and indeg[5] == 4


def test_generator_is_deterministic_and_validates():
    assert structured_problem(7, "contiguous") == structured_problem(7, "contiguous")
    assert structured_problem(random.Random(7), "dag_order") == structured_problem(7, "dag_order")
    assert structured_problem(7, "contiguous") != structured_problem(8, "contiguous")
    with pytest.raises(SpecError, match="unknown structure"):
        structured_problem(0, "convex")
    with pytest.raises(SpecError, match="unknown shape"):
        structured_graph(random.Random(0), "ring", 5)
    with pytest.raises(SpecError, match="n >= 4"):
        structured_graph(random.Random(0), "chain", 3)


# ---------------------------------------------------------------------------- binding() itself
@pytest.mark.parametrize("seed", range(12))
def test_one_pass_binding_equals_two_brute_forces(seed):
    problem = structured_problem(seed)
    (term,) = {type(t) for t in problem.constraints}
    assert binding(problem, term) == (optimum(problem), optimum(without(problem, term)))


def test_binding_on_the_known_instances():
    assert binding(testing.fig2()[0], DagOrder) == (6.0, 5.0)  # Archer et al. Fig. 2: the cyclic split
    assert binds(testing.fig2()[0], DagOrder)
    assert binding(testing.chain()[0], DagOrder) == (5.0, 5.0) and not binds(testing.chain()[0], DagOrder)
    assert binds(testing.training_gpipe()[0], Contiguous)  # 14 contiguous, 13 without
    assert not binds(testing.accelerators_cpu()[0], Memory)  # the CPU takes the embedding either way


def test_without_needs_the_term_and_keeps_the_rest():
    problem, _ = testing.accelerators_cpu()
    relaxed = without(problem, Contiguous)
    assert [type(t) for t in relaxed.constraints] == [Memory]
    assert relaxed.source_graph == problem.source_graph and relaxed.cluster == problem.cluster
    with pytest.raises(SpecError, match="no DagOrder constraint"):
        without(problem, DagOrder)


def test_infeasible_counts_as_infinite():
    problem, _ = testing.memory_binds()
    tight = problem.__class__(problem.source_graph, problem.cluster.__class__.accelerators(1, memory=5.0),
                              problem.objective, problem.constraints)
    assert optimum(tight) == math.inf
    assert binding(tight, Memory) == (math.inf, 6.0) and binds(tight, Memory)


# ---------------------------------------------------------------------------- conftest: the shared marker
SHARED_PROBE = '''
import pytest


@pytest.fixture(scope="session", autouse=True)
def _compiled_kernels():
    pass  # the probe runs no heuristic: the conftest's warm-up of every heuristic would be most of its time


def test_uses_the_data(shared_data):
    assert shared_data.is_dir()


def test_needs_nothing():
    pass
'''


def _probe(tmp_path, *args: str, require: bool) -> subprocess.CompletedProcess:
    """Run tests/conftest.py in a directory whose ../../shared/data does not exist."""
    root = tmp_path / "clone"
    (root / "tests").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "conftest.py", root / "tests" / "conftest.py")
    (root / "tests" / "test_probe.py").write_text(SHARED_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("PLACEMENT_DSL_REQUIRE_SHARED", "HYPOTHESIS_PROFILE")}
    if require:
        env["PLACEMENT_DSL_REQUIRE_SHARED"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
                           "--rootdir", str(root), "-o", "markers=shared", *args, str(root / "tests")],
                          check=False, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_shared_fixture_users_are_marked_and_skip_without_the_data(tmp_path):
    assert not (tmp_path / "shared" / "data").exists()
    done = _probe(tmp_path, "-m", "shared", require=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 skipped, 1 deselected" in done.stdout  # marked automatically, then skipped cleanly


def test_a_skipped_shared_test_fails_when_the_data_is_required(tmp_path):
    done = _probe(tmp_path, require=True)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 passed, 1 error" in done.stdout
    assert "PLACEMENT_DSL_REQUIRE_SHARED=1" in done.stdout and "is missing" in done.stdout
