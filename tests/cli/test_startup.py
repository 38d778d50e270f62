"""Start-up: importing the package, the command line's help and ``zoo`` load neither the solver stack nor numba
(the heuristics' registry lists its methods from their declarations, not by importing the modules that compile
kernels). Checked in a fresh interpreter by what is in ``sys.modules``, not by timing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"pyomo", "numba", "ortools", "highspy", "pyscipopt"}


@pytest.mark.parametrize("argv", [None, ["--help"], ["solve", "--help"], ["bounds", "--help"], ["zoo"]],
                         ids=["import", "help", "solve-help", "bounds-help", "zoo"])
def test_start_up_loads_no_solver_stack_and_no_numba(argv):
    code = "import placement_dsl"
    if argv is not None:
        code += f"\nfrom placement_dsl.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    code += f"\nimport sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_heuristic_run_loads_no_solver_stack(tmp_path):
    from placement_dsl.cluster import Cluster
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / "chain.json"
    g = Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(6)], [(f"v{i}", f"v{i + 1}") for i in range(5)])
    save_workload(Workload(g, Cluster.stages(2)), path)
    shown = _dp_run(path, "sorted({m.split('.')[0] for m in sys.modules} & {'pyomo', 'ortools', 'highspy', "
                          "'pyscipopt'})")
    assert shown == "[]"  # the answer's report came through result.py, which needs none


def _dp_run(path, expression: str) -> str:
    """What a fresh interpreter prints of ``expression`` after ``solve PATH --method dp`` (the last line)."""
    code = (f"from placement_dsl.cli import main\nassert main(['solve', {str(path)!r}, '--method', 'dp', '--json']) == 0"
            f"\nimport sys\nprint({expression})")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_a_dp_run_on_a_small_graph_loads_neither_networkx_nor_the_slicer(tmp_path):
    """The DP's path (contraction, evaluation of its split) checks cycles itself; networkx (half a second of start-up)
    is loaded only to name a cycle it found, and the slicer's kernels only for graphs large enough to need them."""
    from placement_dsl.cluster import Cluster
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / "fork.json"
    g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 4.0}, out_bytes=1.0) for i in range(6)],
              [("v0", "v1"), ("v0", "v2"), ("v1", "v3"), ("v2", "v3"), ("v3", "v4"), ("v4", "v5")])
    save_workload(Workload(g, Cluster.accelerators(2, cpus=1)), path)
    shown = _dp_run(path, "sorted({m.split('.')[0] for m in sys.modules} & {'networkx', 'scipy', 'pyomo'}), "
                          "len(sys.modules['placement_dsl.heuristics.slice_kernels'].slice_dp.signatures)")
    assert shown == "[] 0"  # the slicing DP's kernel never loaded
