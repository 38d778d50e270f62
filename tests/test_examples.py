"""The runnable examples and the documentation's code blocks work as written.

Each example under ``examples/`` written for the guides runs as ``__main__`` and must finish and
print its key line (the quickstart as a subprocess that exits 0, the others in the test's process). The ``python`` blocks of each guide run in order in one namespace (in a
scratch directory), and the tutorial's ``placement-dsl`` commands run through the CLI's entry
point. (``custom_constraint.py`` and ``custom_formulation.py`` are run by
``tests/test_formulations.py::test_examples_run``.)
"""
from __future__ import annotations

import os
import re
import runpy
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"

# example -> a line (regular expression) its output must contain
KEY_LINES = {
    "quickstart.py": r"^status optimal; objective 11\.1250; bound 11\.1250; gap 0\.00%; warm start accepted: True$",
    "training_schedules.py": r"^1f1b  on the PipeDream split: .* -> analytic 155\.9324$",
    "heuristics_vs_mip.py": r"^MIP \(non-contiguous, warm start [a-z-]+ 5[23]\.\d{4}\): (time_limit_feasible|optimal), ",
    "certify_zoo.py": r"^certified \d of 4 models within 0\.1%$",
}
AS_A_PROCESS = "quickstart.py"  # the one example run by a fresh interpreter; the others run in the test's process
SECONDS = r"(optimal|no_bound|time_limit|skipped|not_applicable) +\d+\.\d\d"
GUIDES = ("tutorial.md", "heuristics.md", "solvers.md", "formats.md", "index.md", "dsl.md", "training.md")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


@pytest.mark.parametrize("script", sorted(set(KEY_LINES) - {AS_A_PROCESS}))
def test_example_runs(script, tmp_path, monkeypatch, capsys):
    """In this process, as ``__main__`` (a fresh interpreter per example paid the package's imports each time):
    an exception fails it as a non-zero exit would."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / script)])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    out = capsys.readouterr().out
    assert re.search(KEY_LINES[script], out, flags=re.MULTILINE), out[-3000:]


def test_quickstart_runs_as_a_script(tmp_path):
    """The README's first example as its reader runs it: a fresh interpreter, exit 0."""
    done = subprocess.run([sys.executable, str(EXAMPLES / AS_A_PROCESS)], check=False, cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(KEY_LINES[AS_A_PROCESS], done.stdout, flags=re.MULTILINE), done.stdout[-3000:]


def blocks(guide: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / guide).read_text(), flags=re.DOTALL)


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_python_blocks_run(guide, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("__docs__")  # a real module: dataclasses defined in a guide look their names up there
    monkeypatch.setitem(sys.modules, "__docs__", module)
    namespace = module.__dict__
    for block in blocks(guide, "python"):
        exec(compile(block, str(DOCS / guide), "exec"), namespace)  # noqa: S102 - the test runs the guide's code


def test_tutorial_python_output_matches(tmp_path, monkeypatch, capsys):
    """The tutorial's ``text`` blocks are the output of the ``python`` block just before them."""
    monkeypatch.chdir(tmp_path)
    text = (DOCS / "tutorial.md").read_text()
    pairs = re.findall(r"```python\n(.*?)```\s*\n```text\n(.*?)```", text, flags=re.DOTALL)
    assert len(pairs) >= 8
    namespace: dict = {"__name__": "__docs__"}
    setup = "\n".join(re.findall(r"```python\n(.*?)```", text.split("## 1.")[0], flags=re.DOTALL))
    exec(compile(setup, "pre", "exec"), namespace)  # noqa: S102 - the tutorial's set-up code, run as written
    for code, expected in pairs:
        capsys.readouterr()
        exec(compile(code, "tutorial.md", "exec"), namespace)  # noqa: S102 - the tutorial's code, run as written
        got = capsys.readouterr().out
        if "seconds" in expected:  # timings vary: compare everything but the seconds column
            got, expected = (re.sub(SECONDS, r"\1 -", s) for s in (got, expected))
        assert got.strip() == expected.strip()


def test_tutorial_commands_run(tmp_path, monkeypatch, capsys):
    """Each command through the CLI's entry point in this process (the console script's start-up and exit codes
    as a process are tests/cli/test_startup.py's and tests/cli/test_cli.py's): a fresh interpreter per command
    paid the package's imports seven times."""
    from placement_dsl.cli import main

    monkeypatch.chdir(tmp_path)
    commands = [line for block in blocks("tutorial.md", "bash") for line in block.splitlines()
                if line.startswith("placement-dsl ")]
    assert len(commands) >= 5
    for line in commands:
        code = main(shlex.split(line)[1:])
        assert code == 0, f"{line}\n{capsys.readouterr().err[-2000:]}"
