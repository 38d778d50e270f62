"""docs/dsl.md's registry examples run as written: a new bound, a new heuristic and a new importer, each one
block of about 30 lines that registers itself and needs no edit elsewhere."""
from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from placement_dsl.errors import SpecError
from placement_dsl.heuristics import registry
from placement_dsl.io import formats
from placement_dsl.levels import base

DSL = Path(__file__).resolve().parents[1] / "docs" / "dsl.md"


def registry_blocks() -> list[str]:
    section = DSL.read_text().split("## Registries")[1].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


@pytest.fixture
def scratch(monkeypatch, tmp_path):
    """Each registry as it is, restored after the test; a module namespace for the blocks; a scratch directory."""
    monkeypatch.setattr(registry, "HEURISTICS", dict(registry.load()))
    monkeypatch.setattr(formats, "IMPORTERS", dict(formats.load()))
    saved = dict(base.load())
    # the guide's blocks may have run already in this session (tests/test_examples.py), from another module
    registry.HEURISTICS.pop("round-robin", None)
    formats.IMPORTERS.pop("edge-list", None)
    base.LEVELS.pop("heaviest-op", None)
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("__dsl_registries__")  # the blocks' functions get a module name
    monkeypatch.setitem(sys.modules, module.__name__, module)
    yield module.__dict__
    base.LEVELS.clear()
    base.LEVELS.update(saved)


def run(block: str, namespace: dict) -> None:
    exec(compile(block, str(DSL), "exec"), namespace)  # noqa: S102 - the documentation's own code


def test_the_section_shows_three_short_blocks():
    blocks = registry_blocks()
    assert len(blocks) == 3
    assert all(len(block.strip().splitlines()) <= 35 for block in blocks)


def test_a_new_bound(scratch):
    bound = registry_blocks()[0]
    assert "@level(" in bound
    run(bound, scratch)
    assert "heaviest-op" in base.LEVELS and base.LEVELS["heaviest-op"].defaults == frozenset()


def test_a_new_heuristic(scratch):
    run(registry_blocks()[1], scratch)
    assert registry.get("round-robin").optimizes == "max_load"


def test_a_new_importer(scratch, tmp_path):
    run(registry_blocks()[2], scratch)
    assert formats.get("edge-list").suffixes == (".edgelist",)
    bad = tmp_path / "bad.edgelist"
    bad.write_text("# edges\na b two\n")
    with pytest.raises(SpecError, match=r"row 2: expected 'SRC DST WORK', got 'a b two'"):
        scratch["load_workload"](bad)
    sniffed = tmp_path / "g.txt"
    sniffed.write_text("# edges\na b 1\n")
    assert scratch["load_workload"](sniffed).format == "edge-list"
