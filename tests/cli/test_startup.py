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
