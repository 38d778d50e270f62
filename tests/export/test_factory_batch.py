"""A PyTorch factory is built at its own default batch unless ``--batch`` is given: a model whose forward branches
on ``x.shape[0]`` is traced down the branch its author built it for, and the profile measures what the import
traces."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("torch")

MODEL = textwrap.dedent('''
    import torch
    from torch import nn

    class ShapeFlow(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 16)
            self.big = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
            self.small = nn.Linear(16, 16)
            self.b = nn.Linear(16, 4)

        def forward(self, x):
            h = self.a(x)
            h = self.big(h) if x.shape[0] > 2 else self.small(h)
            return self.b(h)

    def make(batch=4):
        return ShapeFlow(), (torch.randn(batch, 8),)

    def make_required(batch):
        return ShapeFlow(), (torch.randn(batch, 8),)
''')


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "shapeflow_models.py"
    path.write_text(MODEL)
    return path


def _modules(workload_json) -> set[str]:
    ops = json.loads(workload_json.read_text())["graph"]["ops"]
    return {op.get("attrs", {}).get("module", "").split(".")[0] for op in ops}


def test_the_import_traces_the_factorys_own_batch_unless_batch_is_given(factory_file, tmp_path, capsys):
    from placement_dsl.cli import main

    own, one = tmp_path / "own.json", tmp_path / "one.json"
    assert main(["import", f"{factory_file}:make", "--out", str(own), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dims"] == {"batch": 4}
    assert "big" in _modules(own) and "small" not in _modules(own)
    assert main(["import", f"{factory_file}:make", "--batch", "1", "--out", str(one), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dims"] == {"batch": 1}
    assert "small" in _modules(one) and "big" not in _modules(one)
    assert main(["import", f"{factory_file}:make", "--out", str(own)]) == 0
    assert "traced at batch 4, the factory's own (--batch N to change)" in capsys.readouterr().out


def test_a_factory_requiring_a_batch_is_built_at_one(factory_file):
    from placement_dsl.io.torch_export import load

    w = load(f"{factory_file}:make_required")
    assert w.meta["dims"] == {"batch": 1}
    assert "small" in {op.attrs.get("module", "").split(".")[0] for op in w.graph.ops}


def test_the_profile_builds_the_model_as_the_import_does(factory_file):
    from placement_dsl import profile

    _, args, _ = profile.build(f"{factory_file}:make")
    assert args[0].shape[0] == 4
    _, args, _ = profile.build(f"{factory_file}:make", batch=2)
    assert args[0].shape[0] == 2
