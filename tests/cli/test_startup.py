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


def _dp_run(path, expression: str, command: tuple[str, ...] = ("solve", "--method", "dp")) -> str:
    """What a fresh interpreter prints of ``expression`` after ``solve PATH --method dp`` (or another ``command``
    on ``PATH``; the last line)."""
    argv = [command[0], str(path), *command[1:], "--json"]
    code = f"from placement_dsl.cli import main\nassert main({argv!r}) == 0\nimport sys\nprint({expression})"
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
    shown = _dp_run(path, "sorted({m.split('.')[0] for m in sys.modules} & {'networkx', 'scipy', 'pyomo', 'numba'}), "
                          "len(sys.modules['placement_dsl.heuristics.slice_kernels'].slice_dp.signatures)")
    assert shown == "[] 0"  # the slicing DP's kernel never loaded


def _small_workload(tmp_path):
    from placement_dsl.cluster import Cluster
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / "chain.json"
    g = Graph([Op(name=f"v{i}", work=1.0 + i % 3, out_bytes=1.0) for i in range(8)],
              [(f"v{i}", f"v{i + 1}") for i in range(7)])
    save_workload(Workload(g, Cluster.stages(3)), path)
    return path


@pytest.mark.parametrize("command", [("solve", "--method", "dp"), ("solve", "--method", "dpl"),
                                     ("solve", "--method", "slicegraph"), ("evaluate",),
                                     ("bounds", "--time-limit", "4")], ids=lambda c: "-".join(c[:3:2]))
def test_a_command_on_a_small_workload_does_not_load_numba(tmp_path, command):
    """Below the size where compiled kernels pay for loading numba and their cache (about a second of CPU), the
    kernels run in Python (:mod:`placement_dsl.heuristics.jit`)."""
    from placement_dsl.io import load_workload, save_placement
    from placement_dsl.placement import Placement

    path = _small_workload(tmp_path)
    if command == ("evaluate",):
        w = load_workload(path)
        save_placement(Placement(w.graph, w.cluster, [0, 0, 0, 1, 1, 1, 2, 2]), tmp_path / "split.json", w)
        command = ("evaluate", "--split", str(tmp_path / "split.json"))
    assert _dp_run(path, "'numba' in sys.modules", command) == "False"


def _chain_file(tmp_path, n: int, stages: int):
    from placement_dsl.cluster import Cluster
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / f"chain-{n}-{stages}.json"
    g = Graph([Op(name=f"v{i}", work=1.0 + i % 3, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    save_workload(Workload(g, Cluster.stages(stages)), path)
    return path


def test_a_command_on_a_large_workload_compiles_its_kernels(tmp_path):
    from placement_dsl.heuristics.jit import SMALL_OPS

    path = _chain_file(tmp_path, SMALL_OPS + 1, 2)
    assert _dp_run(path, "'numba' in sys.modules", ("solve", "--method", "slicegraph")) == "True"


def test_the_dp_on_many_ops_but_a_small_lattice_runs_in_python(tmp_path):
    """The DP's kernels run in Python by its work (ideals x device-count states, ideals x nodes), not by the op
    count: 65 ideals on 2 stages stay in Python (0.1 s), and so do 401 on 8 stages; 701 ideals of 700 nodes (more
    than jit.PYTHON_NODE_IDEALS) load numba's kernels (:func:`placement_dsl.heuristics.jit.by_work`)."""
    assert _dp_run(_chain_file(tmp_path, 64, 2), "'numba' in sys.modules") == "False"
    assert _dp_run(_chain_file(tmp_path, 400, 8), "'numba' in sys.modules") == "False"
    assert _dp_run(_chain_file(tmp_path, 700, 2), "'numba' in sys.modules") == "True"


def test_importing_certify_and_every_level_loads_no_solver_stack():
    """The certificate, the driver and every level module import Pyomo, the formulations and the solvers only
    where a level builds a model (a closed-form level, a heuristic's upper bound never do), and networkx where the
    stage cut solves its flows."""
    code = ("import sys\nimport placement_dsl.certify\nfrom placement_dsl.levels.base import load\nload()\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY | {'networkx'})!r})))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _loaded(tmp_path, argv: list[str] | None, modules: bool = False) -> set[str]:
    """The top-level packages (``modules``: the modules) a fresh interpreter holds after ``import placement_dsl``
    and, given ``argv``, the command line run on it (CHAIN and SPLIT stand for a small workload and a split of it)."""
    path = _small_workload(tmp_path)
    if argv is not None and "SPLIT" in argv:
        from placement_dsl.io import load_workload, save_placement
        from placement_dsl.placement import Placement

        w = load_workload(path)
        save_placement(Placement(w.graph, w.cluster, [0, 0, 0, 1, 1, 1, 2, 2]), tmp_path / "split.json", w)
    fill = {"CHAIN": str(path), "SPLIT": str(tmp_path / "split.json")}
    code = "import placement_dsl"
    if argv is not None:
        code += (f"\nfrom placement_dsl.cli import main\ntry:\n    main({[fill.get(a, a) for a in argv]!r})\n"
                 "except SystemExit:\n    pass")
    shown = "m" if modules else "m.split('.')[0]"
    code += f"\nimport sys\nprint(' '.join(sorted({{{shown} for m in sys.modules}})))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.strip().splitlines()[-1].split())


COMMANDS = {"import": None, "help": ["--help"], "zoo": ["zoo"], "evaluate": ["evaluate", "CHAIN", "--split", "SPLIT"],
            "solve-dp": ["solve", "CHAIN", "--method", "dp", "--json"]}


@pytest.mark.parametrize("argv", list(COMMANDS.values()), ids=list(COMMANDS))
def test_start_up_loads_no_pydantic(tmp_path, argv):
    """The records (ops, devices, links) and the methods' options validate themselves (:class:`limits.Validated`,
    :class:`options.Options`): pydantic and its models cost about 0.2 s of CPU on every command."""
    assert "pydantic" not in _loaded(tmp_path, argv)


def test_bounds_on_a_small_workload_loads_no_pyomo(tmp_path):
    """Its family (whether Archer's MIP writes it) is declared (:func:`placement_dsl.levels.base.archer_surely_writes`),
    and the closed forms and the DP settle the gap before any level builds a model."""
    loaded = _loaded(tmp_path, ["bounds", "CHAIN", "--json", "--time-limit", "4"])
    assert not loaded & {"pyomo", "highspy", "pyscipopt", "ortools"}


@pytest.mark.parametrize("command", ["zoo", "evaluate", "solve-dp"])
def test_a_command_builds_only_its_own_parser(tmp_path, command):
    """``solve``, ``evaluate``, ``zoo`` (and the other core commands) parse their line with their own subparser
    (:func:`placement_dsl.cli.parser.build_parser`): the sweeps', pictures', exporters' and profiler's modules
    stay unloaded."""
    loaded = _loaded(tmp_path, COMMANDS[command], modules=True)
    others = {"placement_dsl.cli.sweep", "placement_dsl.cli.show", "placement_dsl.cli.importer",
              "placement_dsl.cli.export", "placement_dsl.cli.profile", "placement_dsl.export", "placement_dsl.profile"}
    assert not loaded & others


@pytest.mark.parametrize("method", ["schedule-lns", "latency-lns", "makespan-lns"])
def test_a_method_refused_for_the_objective_is_refused_before_the_solver_stack_loads(tmp_path, method):
    """The searches' modules load Pyomo and CP-SAT: 10-12 s under load before the one-line refusal (exit 2)."""
    from placement_dsl.cluster import Cluster
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / "chain.json"
    save_workload(Workload(Graph([Op(name="a", work=1.0)], []), Cluster.stages(2)), path)
    argv = ["solve", str(path), "--objective", "throughput", "--method", method, "--time-limit", "3"]
    code = (f"from placement_dsl.cli import main\nassert main({argv!r}) == 2\nimport sys\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"{method} searches" in out.stderr and out.stdout.strip().splitlines()[-1] == "[]"


def test_a_solve_whose_budget_is_spent_before_the_build_loads_no_solver_stack(tmp_path):
    """A model-based solve consults its formulation (which one, whether it accepts, its estimated build) before it
    knows whether it builds a model; one whose budget is spent first answers with its start, and Pyomo, the
    solvers' bindings and CP-SAT (seconds of start-up under load) load only on the path that builds a model."""
    path = _small_workload(tmp_path)
    shown = _dp_run(path, "sorted({m.split('.')[0] for m in sys.modules} & {'pyomo', 'ortools', 'highspy', "
                          "'pyscipopt'})", ("solve", "--method", "ip", "--time-limit", "0.01"))
    assert shown == "[]"
