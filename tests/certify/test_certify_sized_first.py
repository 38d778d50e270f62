"""A MIP level is sized before it loads its formulation: one too large for the time left is skipped without
importing the modelling stack."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    from placement_dsl.certify import certify
    from placement_dsl.cluster import Cluster
    from placement_dsl.constraints import Contiguous, Memory
    from placement_dsl.graph import Graph, Op
    from placement_dsl.objectives import Throughput
    from placement_dsl.problem import Problem

    n = 4_000
    g = Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    problem = Problem(g, Cluster.accelerators(8), Throughput(), [Memory(), Contiguous()])
    cert = certify(problem, budget=3, levels=("simple", "chain", "superblock", "throughput"), stop_at_gap=False)
    for row in cert.levels:
        print(row.level, row.status.value, row.message[:33])
    print("pyomo" in sys.modules)
""")


def test_mip_levels_too_large_for_the_time_left_do_not_import_pyomo():
    """A 20,000-op ``bounds`` whose MIP levels were all too large imported Pyomo (0.5-1.1 s) to find that out: the chain
    level's size check built its formulation, and superblock's ``accepts`` asked the formulation first. Here a 4,000-op
    chain onto 8 accelerators in 3 s: every MIP level is skipped by its size, and Pyomo is never imported."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True).stdout.splitlines()
    assert out[-1] == "False", out
    for name in ("chain", "superblock", "throughput"):
        assert f"{name} skipped model too large for the time left" in out, out
