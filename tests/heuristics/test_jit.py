"""Kernels run in Python for small workloads and compiled otherwise (:mod:`placement_dsl.heuristics.jit`): the
two paths give the same answers, and the Python one never loads numba."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics import jit, run
from placement_dsl.testing import random_graph

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("dp", "dpl", "slicegraph")


def _cases() -> list[tuple[str, object, Cluster, CostModel]]:
    """Random small graphs (integer work, so ties abound: the split, not only its value, must match) on
    identical stages, accelerators with a CPU, tight memory, and a training graph."""
    rng = np.random.default_rng(7)
    cases = []
    for i in range(8):
        n = int(rng.integers(5, 13))
        g = random_graph(rng, n, density=float(rng.uniform(0.15, 0.5)), name=f"g{i}")
        cluster = [Cluster.stages(int(rng.integers(2, 4))), Cluster.accelerators(2, cpus=1),
                   Cluster.stages(3, memory=float(g.param_bytes.sum()) / 2 + 4)][i % 3]
        cases.append((f"g{i}", g, cluster, CostModel()))
    g = random_graph(rng, 10, density=0.3, training=True, name="train")
    cases.append(("train", g, Cluster.stages(2), CostModel.named("pipedream")))
    return cases


def answers() -> dict[str, list[object]]:
    """Every method's objective and op -> device map on every case (an error's type in their place)."""
    out: dict[str, list[object]] = {}
    for name, g, cluster, model in _cases():
        for method in METHODS:
            try:
                res = run(method, g, cluster, model=model)
                out[f"{name}/{method}"] = [res.objective, res.placement.assign.tolist(), sorted(map(sorted, res.placement.replica_sets))]
            except Exception as err:  # noqa: BLE001 - the same refusal on both paths is the same answer
                out[f"{name}/{method}"] = [type(err).__name__]
    return out


def _python_answers() -> dict[str, list[object]]:
    code = ("import json, sys\nfrom placement_dsl.heuristics import jit\nfrom tests.heuristics.test_jit import answers\n"
            "with jit.interpreted():\n    found = answers()\nassert 'numba' not in sys.modules\nprint(json.dumps(found))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_python_and_compiled_kernels_give_the_same_objective_and_split():
    python = _python_answers()
    compiled = json.loads(json.dumps(answers()))
    assert not jit.python_kernels()
    assert python.keys() == compiled.keys()
    solved = [k for k, v in compiled.items() if len(v) == 3]
    assert len(solved) >= 20  # most cases are answered, not refused
    for key in compiled:
        if len(compiled[key]) == 3:
            assert python[key][0] == pytest.approx(compiled[key][0], rel=1e-12), key
        assert python[key][1:] == compiled[key][1:], key


def test_a_kernel_runs_in_python_only_inside_interpreted():
    from placement_dsl.heuristics.kernels import priority_order

    prio = -np.arange(4, dtype=np.float64)
    ptr, idx, indeg = np.array([0, 1, 2, 3, 3]), np.array([1, 2, 3]), np.array([0, 1, 1, 1])
    with jit.interpreted():
        assert jit.python_kernels() == (not jit.is_compiled())
        assert priority_order(prio, ptr, idx, indeg).tolist() == [0, 1, 2, 3]
    assert not jit.python_kernels()
    assert priority_order(prio, ptr, idx, indeg).tolist() == [0, 1, 2, 3]
    assert jit.is_compiled() and "numba" in sys.modules


def test_a_command_on_a_small_workload_interprets_only_until_it_ends():
    assert not jit.python_kernels()
    with jit.scope():
        jit.note_workload(jit.SMALL_OPS)
        assert bool(jit._State.interpreted)
        jit.note_workload(jit.SMALL_OPS + 1)  # a large one adds nothing
    assert not jit._State.interpreted



def test_a_kernel_in_python_sets_numpy_s_error_state_once_not_in_every_kernel_it_calls(monkeypatch):
    """A kernel run in Python wraps integer overflow like numba (``np.errstate``) once, at the outermost call:
    entering it in each nested kernel call cost more than the DP's own work (392,000 entries, 4 s of 7, on
    ResNet-50)."""
    inner = jit.Kernel(lambda x: x + 1, {})  # not declared with njit: never compiled, whatever this process did
    outer = jit.Kernel(lambda x: inner(x) * 2, {})
    entered = []
    real = jit.np.errstate

    def counting(**kw):
        entered.append(kw)
        return real(**kw)

    monkeypatch.setattr(jit.np, "errstate", counting)
    with jit.interpreted():
        assert outer(3) == 8 and outer(4) == 10
    assert entered == [{"over": "ignore"}] * 2


def _api_run(code: str) -> str:
    """The last line a fresh interpreter prints running ``code``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(("n", "stages", "compiled"), [(64, 2, False), (120, 15, False), (400, 2, False),
                                                       (500, 40, False), (300, 250, True), (700, 2, True)])
def test_the_dp_called_from_the_api_picks_python_or_compiled_kernels_by_its_lattice(n, stages, compiled):
    """``heuristics.run("dp", ...)`` (not only the command line) runs its kernels in Python while ideals x
    device-count states stay within ``jit.PYTHON_WORK``, the ideals within ``jit.PYTHON_IDEALS`` and ideals x nodes
    within ``jit.PYTHON_NODE_IDEALS``, and compiled beyond (a chain of n ops has n + 1 ideals, on s stages s + 1
    states), with the same answer."""
    code = ("import sys\nfrom placement_dsl.cluster import Cluster\nfrom placement_dsl.graph import Graph, Op\n"
            "from placement_dsl.heuristics import run, jit\n"
            f"n = {n}\ng = Graph([Op(name=f'v{{i}}', work=1.0 + i % 3, out_bytes=1.0) for i in range(n)], "
            "[(f'v{i}', f'v{i + 1}') for i in range(n - 1)])\n"
            f"r = run('dp', g, Cluster.stages({stages}))\n"
            "print(r.objective, r.placement.assign.tolist(), jit.is_compiled(), 'numba' in sys.modules)")
    shown = _api_run(code)
    objective, rest = shown.split(" ", 1)
    assign, flags = rest.rsplit("] ", 1)
    assert flags == f"{compiled} {compiled}"
    with jit.interpreted(enabled=False):  # this process: compiled kernels
        from placement_dsl.graph import Graph, Op

        g = Graph([Op(name=f"v{i}", work=1.0 + i % 3, out_bytes=1.0) for i in range(n)],
                  [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
        r = run("dp", g, Cluster.stages(stages))
    assert float(objective) == pytest.approx(r.objective, rel=1e-12)
    assert json.loads(assign + "]") == r.placement.assign.tolist()


def test_the_dp_loads_compiled_kernels_before_dpl_when_its_lattice_will_be_large():
    """Two side-by-side chains of 70 ops have 5,041 ideals (above ``jit.PYTHON_IDEALS``) but a DFS order of 141
    prefixes: DPL's run compiles too, rather than sweeping its prefixes in Python before the DP compiles."""
    code = ("import sys\nfrom placement_dsl.cluster import Cluster\nfrom placement_dsl.graph import Graph, Op\n"
            "from placement_dsl.heuristics import run, jit\nimport placement_dsl.heuristics.ideals as M\n"
            "ops = [Op(name=f'{c}{i}', work=1.0 + i % 3, out_bytes=1.0) for c in 'ab' for i in range(70)]\n"
            "edges = [(f'{c}{i}', f'{c}{i + 1}') for c in 'ab' for i in range(69)]\n"
            "seen, real = [], M._search\n"
            "def spy(su, **kw):\n    seen.append((kw['linearize'], jit.python_kernels()))\n    return real(su, **kw)\n"
            "M._search = spy\nr = run('dp', Graph(ops, edges), Cluster.stages(2))\nprint(r.info['ideals'], seen)")
    assert _api_run(code) == "5041 [(True, False), (False, False)]"


def test_by_work_leaves_python_once_the_work_is_large_and_restores_the_state():
    if jit.is_compiled():
        assert not jit.tentative()
    with jit.interpreted(enabled=False):
        saved = (jit._State.interpreted, jit._State.tentative)
        jit._State.compiled, was = False, jit._State.compiled
        try:
            with jit.by_work(10):
                assert jit.tentative() and jit.python_kernels()
                assert jit.note_work(jit.PYTHON_WORK)
                assert not jit.note_work(jit.PYTHON_WORK + 1)
                assert not jit.tentative() and not jit.python_kernels()
            with jit.by_work(10):
                assert jit.note_work(1, jit.PYTHON_IDEALS)
                assert not jit.note_work(1, jit.PYTHON_IDEALS + 1)
            assert (jit._State.interpreted, jit._State.tentative) == saved
            with jit.by_work(10):
                assert jit.python_kernels()
            with jit.by_work(jit.BY_WORK_OPS + 1):
                assert not jit.python_kernels()
            assert (jit._State.interpreted, jit._State.tentative) == saved
        finally:
            jit._State.compiled = was


def test_load_kernels_runs_each_method_once_per_process(monkeypatch):
    ran = []
    monkeypatch.setattr(jit, "run", lambda method, *a, **k: ran.append(method))
    monkeypatch.setattr(jit, "_LOADED", set())
    jit.load_kernels(["greedy", "dp"])
    jit.load_kernels(["dp", "slicegraph"])
    assert ran == ["greedy", "dp", "slicegraph"]
    assert jit.is_compiled()


def test_a_sweep_process_s_warm_up_loads_the_kernels_its_tasks_run():
    """The sweep's fork server warms up once (``sweep.tasks.warm``), so that no task's time limit pays for numba:
    its three-op warm-up chain is small enough for Python kernels, so the kernels are loaded by name
    (:func:`placement_dsl.heuristics.jit.load_kernels`), the same ones certify loads before forking."""
    code = ("import sys\nfrom placement_dsl.sweep import tasks\nfrom placement_dsl.heuristics import jit\n"
            "from placement_dsl.heuristics.slice_kernels import slice_dp\ntasks.warm()\n"
            "print(jit.is_compiled(), len(slice_dp.signatures) > 0)")
    assert _api_run(code) == "True True"


def _random_dag(rng: np.random.Generator, n: int, density: float) -> tuple[np.ndarray, np.ndarray]:
    """A DAG on nodes numbered topologically as its predecessor lists in CSR form."""
    pairs = [(u, v) for v in range(n) for u in range(v) if rng.random() < density]
    src = np.array([u for u, _ in pairs], dtype=np.int64)
    dst = np.array([v for _, v in pairs], dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=ptr[1:])
    return ptr, src[np.argsort(dst, kind="stable")]


def test_the_ideal_count_estimate_in_python_is_the_kernel_s_to_the_bit():
    """:func:`~placement_dsl.heuristics.ideal_enumeration.log2_ideal_estimate` runs in Python as its numpy version
    (lists, and the Mersenne Twister's doubles without numpy.random): the kernel's loops give the same value."""
    from placement_dsl.heuristics import ideal_enumeration  # noqa: F401 - declares the kernel

    kernel = next(k for k in jit._KERNELS if k.__name__ == "log2_ideal_estimate")  # compiled or not: its functions
    rng = np.random.default_rng(3)
    for _ in range(60):
        ptr, idx = _random_dag(rng, int(rng.integers(0, 50)), float(rng.uniform(0.02, 0.4)))
        walks, seed = int(rng.integers(1, 70)), int(rng.integers(0, 2**32))
        with np.errstate(divide="ignore"):
            assert kernel.in_python(ptr, idx, walks, seed) == kernel.py_func(ptr, idx, walks, seed)
    assert kernel.in_python is not kernel.py_func


def test_thelegacy_stream_is_numpy_s_seeded_stream():
    from placement_dsl.heuristics.ideal_enumeration import legacy_stream

    for seed in (0, 7, 2**32 - 1):
        ours = legacy_stream(seed)
        theirs = np.random.RandomState(seed)
        assert [ours.random() for _ in range(1500)] == theirs.random_sample(1500).tolist()


def test_the_ideals_enumerated_in_python_are_the_kernel_s_in_the_same_order():
    """:func:`~placement_dsl.heuristics.ideal_enumeration.enumerate_ideals` runs in Python as its own version (ideals
    as Python integers): the same ideals, sub-ideal pairs and status, also when the limit stops it."""
    from placement_dsl.heuristics import ideal_enumeration  # noqa: F401 - declares the kernel

    kernel = next(k for k in jit._KERNELS if k.__name__ == "enumerate_ideals")
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(1, 130))
        ptr, idx = _random_dag(rng, n, float(rng.uniform(0.01, 0.3)))
        args = (ptr, idx, max(1, -(-n // 64)), int(rng.choice([5, 50, 3000])), np.inf)
        with jit.interpreted():
            theirs, ours = kernel.py_func(*args), kernel.in_python(*args)
        assert theirs[3] == ours[3]
        for a, b in zip(theirs[:3], ours[:3]):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert kernel.in_python is not kernel.py_func


def test_the_dp_under_memory_per_schedule_compiles_beyond_the_suffix_dp_s_own_limits():
    """Memory per schedule runs the suffix DP, which has no numpy version a level at a time: a 401-ideal chain (in
    Python without the schedule) loads numba's kernels there (``ideals.SUFFIX_PYTHON_IDEALS``)."""
    code = ("import sys\nfrom placement_dsl.cluster import Cluster\nfrom placement_dsl.graph import Graph, Op\n"
            "from placement_dsl.evaluate import CostModel\nfrom placement_dsl.training import TrainingMemorySpec\n"
            "from placement_dsl.heuristics import run, jit\n"
            "n = 400\nops = [Op(name=f'f{i}', work=1.0 + i % 3, out_bytes=1.0, group=f'g{i}') for i in range(n)]\n"
            "ops += [Op(name=f'b{i}', work=2.0, out_bytes=1.0, backward=True, group=f'g{i}') for i in range(n)]\n"
            "edges = [(f'f{i}', f'f{i + 1}') for i in range(n - 1)] + [(f'b{i + 1}', f'b{i}') for i in range(n - 1)]\n"
            "g = Graph(ops, edges + [(f'f{i}', f'b{i}') for i in range(n)])\n"
            "model = CostModel(training_memory=TrainingMemorySpec('1f1b'))\n"
            "r = run('dp', g, Cluster.stages(2), model=model)\n"
            "print(jit.is_compiled(), 'numba' in sys.modules)")
    assert _api_run(code) == "True True"


def test_the_fallback_s_balanced_split_loads_no_kernels():
    """The fallback's work-balanced slicing (a solve's held split, before its start) runs its ``O(n + m)`` kernels in
    Python on a graph past ``jit.SMALL_OPS``: numba stays unloaded (the kernels give the same answers either way:
    test_python_and_compiled_kernels_give_the_same_objective_and_split)."""
    code = ("import sys\nimport numpy as np\nfrom placement_dsl.cluster import Cluster\n"
            "from placement_dsl.evaluate import CostModel\nfrom placement_dsl.heuristics import jit\n"
            "from placement_dsl.heuristics.fallback import _balanced\nfrom placement_dsl.testing import random_graph\n"
            "g = random_graph(np.random.default_rng(3), 60, density=0.1)\n"
            "r = _balanced(g, Cluster.accelerators(3, cpus=1), CostModel())[0]\n"
            "assert g.n > jit.SMALL_OPS and r.placement.assign.shape == (g.n,)\n"
            "print(jit.is_compiled(), 'numba' in sys.modules)")
    assert _api_run(code) == "False False"
