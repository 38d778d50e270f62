"""The runnable examples and the documentation's code blocks work as written.

Each example under ``examples/`` written for the guides runs as ``__main__`` and must finish and
print its key line (the quickstart as a subprocess that exits 0, the others in the test's process). The
``python`` blocks of every page under ``docs/`` run in order in one namespace per page (in a scratch
directory), and a ``text`` block right after a ``python`` block (nothing but blank lines between) is what that
block prints: compared line by line, where ``...`` in a shown line stands for any text of that line (a time, a
log's timestamp) and a status's seconds column is not compared. The tutorial's ``placement-dsl`` commands run
through the CLI's entry point. (``custom_constraint.py`` and ``custom_formulation.py`` are run by
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
GUIDES = tuple(sorted(p.name for p in DOCS.glob("*.md") if "```python" in p.read_text()))
BLOCK = re.compile(r"```(\w*)\n(.*?)```", flags=re.DOTALL)


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


def steps(guide: str) -> list[tuple[str, str | None]]:
    """The guide's ``python`` blocks in order, each with the ``text`` block shown right after it (its output) or
    ``None``."""
    text = (DOCS / guide).read_text()
    found = list(BLOCK.finditer(text))
    out = []
    for block, after in zip(found, [*found[1:], None]):
        if block.group(1) != "python":
            continue
        shown = (after is not None and after.group(1) == "text" and not text[block.end():after.start()].strip())
        out.append((block.group(2), after.group(2) if shown else None))
    return out


def same_output(got: str, shown: str) -> bool:
    """``got`` is what ``shown`` shows: line by line, ``...`` standing for any text within a line, a status's
    seconds column not compared."""
    got_lines, shown_lines = (re.sub(SECONDS, r"\1 -", s).strip().splitlines() for s in (got, shown))
    return len(got_lines) == len(shown_lines) and all(
        re.fullmatch(".*?".join(map(re.escape, want.rstrip().split("..."))), line.rstrip())
        for line, want in zip(got_lines, shown_lines))


def test_every_page_with_python_is_run():
    assert {"tutorial.md", "heuristics.md", "export.md", "import.md"} <= set(GUIDES)
    assert sum(shown is not None for _, shown in steps("tutorial.md")) >= 8
    assert [shown is not None for _, shown in steps("export.md")] == [True, True]
    assert same_output("highs (t=0.009s) optimal  0.12\n", "highs (t=...s) optimal  0.00")
    assert not same_output("local-search 9.2839", "local-search 15.5886")
    assert not same_output("a\nb", "a")


@pytest.fixture
def registries():
    """A page registering a heuristic, an importer or a level (docs/dsl.md's ``round-robin``) registers it for
    itself: each registry is restored in place after the page (other modules hold the same dicts), so every page
    sees the registries as the package makes them, whatever page ran before it."""
    from placement_dsl.heuristics import registry
    from placement_dsl.io import formats
    from placement_dsl.levels import base

    kept = [(r, dict(r)) for r in (registry.load(), formats.load(), base.load())]
    yield
    for r, saved in kept:
        r.clear()
        r.update(saved)


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_python_blocks_run_and_print_what_they_show(guide, tmp_path, monkeypatch, capsys, registries):
    """Every page's ``python`` blocks, run in order in one namespace as a reader runs them, print the ``text``
    block shown after them."""
    code = [c for c, _ in steps(guide)]
    if any(re.search(r"^\s*(import|from) torch\b", c, flags=re.MULTILINE) for c in code):
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("__docs__")  # a real module: dataclasses defined in a guide look their names up there
    monkeypatch.setitem(sys.modules, "__docs__", module)
    namespace = module.__dict__
    for i, (block, shown) in enumerate(steps(guide)):
        capsys.readouterr()
        exec(compile(block, f"{DOCS / guide} (python block {i + 1})", "exec"), namespace)  # noqa: S102 - the guide's code
        got = capsys.readouterr().out
        if shown is not None:
            assert same_output(got, shown), f"{guide}, python block {i + 1} printed:\n{got}\nthe page shows:\n{shown}"


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
