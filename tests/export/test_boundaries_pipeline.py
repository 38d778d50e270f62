"""``solve --boundaries module[:D]`` gives plans that ``export`` hands to torch and that torch runs as the model.

Small models whose root calls functions between its children (a mean before the head), applies one block in a
loop, joins a skip connection, returns two heads or iterates a ``ModuleList``; each imported by ``torch.export`` and by both ONNX exporters,
solved by the DP, SliceGraph and the IP under the term at 2 and 3 stages, exported to a ``split_spec`` and run by
torch's ``pipeline()``. Before, a stage could begin with the root's mean after the blocks: the stage of the blocks
alone was cut at both ends of ``blocks`` (refused), and a block called three times was split at its end (torch
cut after every call: more stages than the plan).
"""
from __future__ import annotations

import json

import pytest

from placement_dsl.cli import main
from placement_dsl.io import save_workload
from tests.export.pipes import runs_as_planned

torch = pytest.importorskip("torch")
nn = torch.nn


class MeanBeforeHead(nn.Module):
    """An embedding, a ``Sequential`` of residual blocks, the root's own mean, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(12, 16)
        self.blocks = nn.Sequential(*[nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16), nn.GELU())
                                      for _ in range(3)])
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)).mean(dim=1))


class BlockInALoop(nn.Module):
    """One block applied three times with the root's residual add between the calls."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(12, 16)
        self.block = nn.Sequential(nn.Linear(16, 16), nn.Tanh())
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h = self.inp(x)
        for _ in range(3):
            h = h + self.block(h)
        return self.out(h)


class SkipJoin(nn.Module):
    """An encoder whose output the root concatenates with a later module's output."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.mid = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
        self.dec = nn.Linear(32, 4)

    def forward(self, x):
        a = self.enc(x)
        return self.dec(torch.cat([self.mid(a), a], dim=-1))


class TwoHeads(nn.Module):
    """A trunk and two heads; returns both."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16))
        self.cls = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
        self.reg = nn.Linear(16, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h), self.reg(h)


class Residual(nn.Module):
    """``x + f(x)``: the add is the block's own op."""

    def __init__(self) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.Linear(16, 16), nn.Tanh())

    def forward(self, x):
        return x + self.f(x)


class IteratedList(nn.Module):
    """Blocks in a ``ModuleList`` the root iterates (never calls: TorchScript's ONNX names its ops ``/h.0/...``, no
    ``/h/`` level, so the first block, not the list, is the split point), then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(12, 16)
        self.h = nn.ModuleList([Residual() for _ in range(3)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        x = self.embed(x)
        for block in self.h:
            x = block(x)
        return self.head(x)


MODELS = [MeanBeforeHead, BlockInALoop, SkipJoin, TwoHeads, IteratedList]


def _workload(model: nn.Module, x, importer: str, tmp_path) -> str:
    path = tmp_path / "model.json"
    if importer == "torch.export":
        from placement_dsl.io.torch_export import from_module

        save_workload(from_module(model, (x,)), path)
        return str(path)
    pytest.importorskip("onnx")
    if importer == "onnx-dynamo":
        pytest.importorskip("onnxscript")
    onnx_path = tmp_path / "model.onnx"
    torch.onnx.export(model, (x,), str(onnx_path), dynamo=importer == "onnx-dynamo")
    assert main(["import", str(onnx_path), "--out", str(path), "--quiet"]) == 0
    return str(path)


@pytest.mark.parametrize("importer", ["torch.export", "onnx-ts", "onnx-dynamo"])
@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_every_plan_under_the_term_exports_and_runs_as_the_model(make, importer, tmp_path):
    torch.manual_seed(0)
    model, x = make().eval(), torch.randn(2, 8, 12)
    work = _workload(model, x, importer, tmp_path)
    run: dict[str, dict] = {}
    for method in ("dp", "slicegraph", "ip"):
        for depth in (1, 2):
            for k in (2, 3):
                cluster = ["--stages", str(k), "--cpus", "0", "--bandwidth", "1e12"]
                split, out = tmp_path / "split.json", tmp_path / "spec.json"
                assert main(["solve", work, *cluster, "--method", method, "--boundaries", f"module:{depth}",
                             "--time-limit", "20", "--quiet", "--out", str(split)]) == 0
                assert main(["export", work, *cluster, "--split", str(split), "--to", "torch-pipelining",
                             "--out", str(out), "--quiet"]) == 0, (method, depth, k)
                spec = json.loads(out.read_text())
                run.setdefault(json.dumps(spec["split_spec"], sort_keys=True), spec)
    for spec in run.values():
        runs_as_planned(model, x, spec, atol=1e-5)
    assert any(spec["num_stages"] > 1 for spec in run.values())
