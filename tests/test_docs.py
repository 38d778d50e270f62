"""The documentation site builds with ``mkdocs build --strict``: every page in the nav, every link and
anchor resolved, the API reference generated from the docstrings without a warning.

mkdocs, mkdocs-material and mkdocstrings[python] are in the ``test`` extra (about 120 MB, half a
minute to install), so CI builds the site on every run; without them the test skips.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
    pytest.importorskip(module)


def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
               "--site-dir", str(site)]
    run = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    warnings = [line for line in run.stderr.splitlines() if line.startswith("WARNING")]
    assert not warnings, warnings
    nav = [line.split(":", 1)[1].strip() for line in (ROOT / "mkdocs.yml").read_text().splitlines()
           if line.startswith("  - ") and line.rstrip().endswith(".md")]
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert set(nav) == pages, f"pages outside the nav: {sorted(pages - set(nav))}"
    api = (site / "api" / "index.html").read_text()
    for name in ("placement_dsl.io.onnx.load", "placement_dsl.progress.report", "placement_dsl.viz.splits.split_points"):
        assert f'id="{name}"' in api, f"{name} is missing from the API reference"
    assert (site / "gallery" / "gantt-gpt2.png").exists() and "gantt-gpt2.png" in (site / "import" / "index.html").read_text()
