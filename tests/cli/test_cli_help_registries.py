"""``--help`` lists the registries' choices — the certificate's levels from their manifest, the input formats from
io/formats.py, the heuristics — without loading Pyomo."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from placement_dsl.heuristics import registry
from placement_dsl.io import formats
from placement_dsl.levels import MANIFEST
from placement_dsl.levels.base import load

ROOT = Path(__file__).resolve().parents[2]
HELP = """
import contextlib, io, sys
from placement_dsl.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main([{argv}])
    except SystemExit:
        pass
print(out.getvalue())
print("loaded:", sorted({{m.split('.')[0] for m in sys.modules}} & {{'pyomo', 'ortools', 'highspy', 'pyscipopt'}}))
"""


def _help(*argv: str) -> str:
    code = HELP.format(argv=", ".join(repr(a) for a in (*argv, "--help")))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100000"}  # no wrapping: argparse breaks names at hyphens
    run = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "loaded: []", "--help loaded the solver stack"
    return " ".join(run.stdout.split())  # help wraps long lines


def _own(module: str) -> bool:
    return module.startswith("placement_dsl.")  # not a method, level or format another test registered


def test_the_levels_manifest_names_every_registered_level_in_rank_order():
    package = [name for name, lv in load().items() if lv.run.__module__.startswith("placement_dsl.levels.")]
    assert list(MANIFEST) == package, "add the level to placement_dsl/levels/__init__.py's MANIFEST"


def test_bounds_help_lists_the_levels_and_the_formats_without_pyomo():
    text = _help("bounds")
    for name, doc in MANIFEST.items():
        assert f"{name} ({doc})" in text
    own = [f.name for f in formats.load().values() if not f.spec and _own(f.read.__module__)]
    assert own and all(name in text.split("--format {")[1].split("}")[0].split(",") for name in own)


def test_solve_help_lists_the_registered_methods_without_pyomo():
    text = _help("solve")
    own = [h.name for h in registry.load().values() if _own(h.module)]
    assert all(name in text for name in own)


def test_levels_are_read_as_names_and_an_unknown_one_is_refused_by_certify(capsys):
    from placement_dsl.testing import run_cli

    code, _, err = run_cli(capsys, "bounds", "zoo:transformer-small", "--levels", "simple,,dp")
    assert code == 2 and "--levels 'simple,,dp': give comma-separated level names" in err
    code, _, err = run_cli(capsys, "bounds", "zoo:transformer-small", "--levels", "simple, nope", "--time-limit", "5")
    assert code == 2 and "unknown level(s) ['nope']" in err
