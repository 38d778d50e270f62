"""The package's layers import one way: the import-linter contracts of pyproject.toml, no circle between modules,
and imports of the package's own modules inside functions only where the allowlist says why."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "placement_dsl"

# Imports of the package's own modules that stay inside functions, by importing module and imported module
# (a prefix ending in "." covers a package), each with its reason. Any other such import belongs at module level.
EXTRA = "an optional extra (onnx, torch, matplotlib, dask, ortools) is imported only when used"
PYOMO = "keeps the Pyomo/CP-SAT stack out of 'import placement_dsl' and 'placement-dsl --help'"
STARTUP = "command-line start-up: a command's modules load when it runs, not for every command"
LEVELS = "a level's bound modules load when the level runs, not for every certification (bounds' start-up)"
LAZY = {
    ("placement_dsl.cli.", "placement_dsl.io.onnx"): EXTRA,
    ("placement_dsl.cli.", "placement_dsl.io.torch_export"): EXTRA,
    ("placement_dsl.cli.", "placement_dsl.viz"): EXTRA,
    ("placement_dsl.cli.", "placement_dsl.sweep"): EXTRA,
    ("placement_dsl.cli.", "placement_dsl.export"): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.profile"): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.heuristics"): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.zoo"): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.io.moirai"): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.files"): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.cli."): STARTUP,
    ("placement_dsl.cli.", "placement_dsl.training_terms"): STARTUP,
    ("placement_dsl.sweep.report", "placement_dsl.sweep.figures"): EXTRA,
    ("placement_dsl.sweep.report", "placement_dsl.certify"): PYOMO,
    ("placement_dsl.sweep.tasks", "placement_dsl.certify"): PYOMO,
    ("placement_dsl.testing", "placement_dsl.cli"): STARTUP,
    ("placement_dsl.levels.latency", "placement_dsl.bounds."): LEVELS,
    ("placement_dsl.levels.latency", "placement_dsl.cpsat_segments"): LEVELS,
    ("placement_dsl.levels.latency", "placement_dsl.cpsat_lift"): LEVELS,
}
# Modules that import Pyomo, CP-SAT or a MIP solver when loaded: an import of one of them may stay in a function
# anywhere (PYOMO above).
HEAVY = ("placement_dsl.blocks", "placement_dsl.formulations", "placement_dsl.compile", "placement_dsl.solve",
         "placement_dsl.solvers", "placement_dsl.sizing", "placement_dsl.cpsat", "placement_dsl.certificate",
         "placement_dsl.certify", "placement_dsl.certify_latency", "placement_dsl.conformance", "placement_dsl.result",
         "placement_dsl.search", "placement_dsl.starts", "placement_dsl.stopped")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> list[str]:
    """The package modules an import names (``from . import a, b`` names both ``a`` and ``b``)."""
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        parts = parts if is_package else parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    names = [f"{base}.{alias.name}" for alias in node.names]
    if node.module is None:
        return names
    # ``from ..io import onnx`` imports the module placement_dsl.io.onnx, ``from ..io import Workload`` only io
    found = [name for name in names if _is_module(name)]
    return found or [base]


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def function_imports() -> list[tuple[str, str, int]]:
    """(importing module, imported package module, line) of every import of the package inside a function."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(func):
                names: list[str] = []
                if isinstance(node, ast.ImportFrom):
                    names = _absolute(module, node, path.name == "__init__.py")
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                found += [(module, name, node.lineno) for name in names if name.split(".")[0] == "placement_dsl"]
    return sorted(set(found))


def _matches(pattern: str, name: str) -> bool:
    return name.startswith(pattern) if pattern.endswith(".") else name == pattern or name.startswith(pattern + ".")


def allowed(importer: str, imported: str) -> bool:
    """Whether an import of ``imported`` may stay inside a function of ``importer``."""
    if any(_matches(heavy, imported) for heavy in HEAVY):
        return True
    return any(_matches(a, importer) and _matches(b, imported) for a, b in LAZY)


def test_package_imports_inside_functions_are_only_the_allowlisted_ones():
    """A package import inside a function hides a circle or an import up the stack from the contracts' readers;
    only optional extras, the Pyomo stack, command-line start-up and deprecated methods import late."""
    late = [f"{importer}:{line} imports {imported}" for importer, imported, line in function_imports()
            if not allowed(importer, imported)]
    assert not late, "move these imports to module level (or say why on the allowlist):\n" + "\n".join(late)


def test_the_function_import_check_reads_relative_imports_as_the_modules_they_name():
    """``from ..graph import Graph`` names placement_dsl.graph, ``from .. import zoo`` and ``from ..io import onnx``
    the modules zoo and io.onnx, ``from ..io import Workload`` only io; in a package's ``__init__``, ``.`` is the
    package itself."""
    code = ("def f():\n    from ..graph import Graph\n    from .. import zoo\n    from ..io import onnx, Workload\n"
            "    from ..io import Workload\n    from . import base\n")
    nodes = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.ImportFrom)]
    module = "placement_dsl.heuristics.polish"
    assert _absolute(module, nodes[0], False) == ["placement_dsl.graph"]
    assert _absolute(module, nodes[1], False) == ["placement_dsl.zoo"]
    assert _absolute(module, nodes[2], False) == ["placement_dsl.io.onnx"]
    assert _absolute(module, nodes[3], False) == ["placement_dsl.io"]
    assert _absolute("placement_dsl.heuristics", nodes[4], True) == ["placement_dsl.heuristics.base"]
    assert _absolute("placement_dsl.heuristics", nodes[1], True) == ["placement_dsl.zoo"]
    assert not allowed("placement_dsl.evaluate", "placement_dsl.report")
    assert allowed("placement_dsl.heuristics.lns", "placement_dsl.solve")  # the Pyomo stack: caught by the contracts
    assert allowed("placement_dsl.cli.show", "placement_dsl.viz.gantt")



def private_imports() -> list[str]:
    """``module:line imports name from other`` for every leading-underscore name a package module imports from another
    package module: a helper two modules share is their API, public and documented, not a private name."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, is_package = _module_name(path), path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or (node.level == 0 and not (node.module or "").startswith(
                    "placement_dsl")):
                continue
            base = _absolute(module, ast.ImportFrom(module=node.module, names=[], level=node.level), is_package)
            found += [f"{module}:{node.lineno} imports {alias.name} from {base[0] if base else node.module}"
                      for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_names():
    private = private_imports()
    assert not private, ("make these public (renamed, with a docstring) or keep them in one module:\n"
                         + "\n".join(private))

def _ignored() -> set[tuple[str, str]]:
    """The imports the layers contract ignores (``a -> b``), read from pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["id"] == "layers")
    return {tuple(part.strip() for part in rule.split("->")) for rule in layers.get("ignore_imports", [])}


def module_cycles() -> list[list[str]]:
    """Circles of run-time imports between the package's modules (the contract's ignored imports left out)."""
    graph = grimp.build_graph("placement_dsl", cache_dir=None, exclude_type_checking_imports=True)
    ignored = _ignored()
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if (module, imported) not in ignored:
                edges.add_edge(module, imported)
    return sorted(sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1)


def test_the_contracts_ignore_no_import():
    """Every import keeps the layers: a deprecated method that reaches up (``Placement.evaluate``) forwards through
    ``deprecated.forward`` by name instead of an ignored import."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert [c["id"] for c in config["contracts"] if c.get("ignore_imports")] == []
    assert not [i for i in function_imports() if i[0] == "placement_dsl.placement"]


def test_no_circle_of_imports_between_modules():
    """Every module imports only modules that do not import it back, directly or through others."""
    cycles = module_cycles()
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_import_contracts_hold():
    """The layers and forbidden-import contracts of pyproject.toml, as CI runs them (lint-imports)."""
    script = Path(sys.executable).with_name("lint-imports")
    if not script.exists():
        pytest.skip("import-linter is not installed (pip install '.[test]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    run = subprocess.run([str(script), "--no-cache"], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def loaded_after(code: str, roots: set[str]) -> list[str]:
    """Which of the top-level modules ``roots`` a fresh interpreter has loaded after running ``code``."""
    code += f"; import sys; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(roots)!r})))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


@pytest.mark.parametrize("code", [
    "import placement_dsl, placement_dsl.presets, placement_dsl.heuristics, placement_dsl.bounds",
    "from placement_dsl.cli import build_parser; build_parser()",  # what 'placement-dsl --help' loads
])
def test_the_package_and_the_command_line_parser_load_no_solver_stack(code):
    """``import placement_dsl`` (the readers, the cost model, the heuristics) and the command line's parser load
    neither Pyomo nor CP-SAT nor a MIP solver: those load when a command that needs them runs."""
    assert loaded_after(code, {"pyomo", "ortools", "highspy", "pyscipopt"}) == []


def test_the_command_line_loads_no_process_pool_temporary_files_nor_hashes_before_a_command_needs_them():
    """``import placement_dsl.cli`` (every command's start) leaves out multiprocessing (only a call with a deadline
    forks), tempfile (with shutil, bz2 and lzma: only a written file needs it), hashlib (only a kernel looked up in
    numba's cache) and numba: together about 15 ms of the DP's 0.4 s whole process on BERT-L3."""
    assert loaded_after("import placement_dsl.cli", {"multiprocessing", "tempfile", "hashlib", "numba"}) == []
