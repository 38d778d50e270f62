"""A split solved for training exports to every runtime: each gradient belongs to its forward op's stage (its
colocation group's forward op), the forward stages are exported, and either view of the model (training or
inference) reads the split."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import EXPORTERS, export
from placement_dsl.io import Workload, save_workload
from placement_dsl.io.workload import with_training
from placement_dsl.placement import Placement

from .test_export import _cut, gpt_like
from .titan_rule import flattened


def _trained(p: Placement) -> Placement:
    """The training graph of ``p``'s graph, each gradient ``v.grad`` on ``v``'s device."""
    g = with_training(Workload(p.graph, p.cluster, "native")).graph
    forward = p.mapping()
    return Placement.from_mapping(g, p.cluster, {n: forward[n.removesuffix(".grad")] for n in g.names})


@pytest.mark.parametrize("to", list(EXPORTERS))
def test_a_training_split_exports_as_its_forward_split(to: str):
    """Before, every format refused: the backward ops on the first device counted as a third stage."""
    p = _cut(gpt_like(), "h2.ln")
    if to == "torchtitan":  # torchtitan splits a top-level list of blocks, not GPT-2's transformer.h
        p = Placement(flattened(p.graph, "transformer", ("h",)), p.cluster, p.assign)
    t = _trained(p)
    assert t.graph.is_training
    assert export(t, to).text == export(p, to).text


def test_a_gradient_off_its_forward_ops_device_is_refused_naming_both():
    t = _trained(_cut(gpt_like(), "h2.ln"))
    assign = t.assign.copy()
    assign[t.graph.index["h3.mlp.grad"]] = 0
    with pytest.raises(SpecError, match=r"backward op 'h3.mlp.grad' runs on 'stage0' but its forward op 'h3.mlp' on "
                                        r"'stage1'"):
        export(Placement(t.graph, t.cluster, assign), "torch-pipelining")


def test_a_split_solved_for_training_exports_from_either_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """solve --training writes the gradients too; export read it only with --training, and then refused it."""
    work, split = tmp_path / "gpt.json", tmp_path / "tr.json"
    save_workload(Workload(gpt_like(), Cluster.stages(2), "native"), work)
    assert main(["solve", str(work), "--training", "--stages", "2", "--method", "dp", "--schedule", "1f1b",
                 "--out", str(split)]) == 0
    assert any(n.endswith(".grad") for n in json.loads(split.read_text())["assignment"])
    texts = {}
    for view in (["--training"], []):
        for to in ("torch-pipelining", "megatron", "deepspeed", "schedule-csv"):
            out = tmp_path / f"{to}{len(view)}.txt"
            capsys.readouterr()
            assert main(["export", str(work), *view, "--split", str(split), "--to", to, "--out", str(out)]) == 0, \
                capsys.readouterr().err
            texts[view != [], to] = out.read_text()
    assert all(texts[True, to] == texts[False, to] for to in ("torch-pipelining", "megatron", "deepspeed"))
    assert json.loads(texts[False, "torch-pipelining"])["num_stages"] == 2
    forward = tmp_path / "fw.json"  # and a forward split exports from the training view
    forward.write_text(json.dumps(_cut(gpt_like(), "h2.ln").to_dict()))
    out = tmp_path / "v.txt"
    assert main(["export", str(work), "--training", "--split", str(forward), "--to", "vllm", "--out", str(out)]) == 0
    assert out.read_text() == "2,2\n"


def test_a_split_of_neither_view_is_the_error_of_the_view_asked_for(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]):
    work, split = tmp_path / "gpt.json", tmp_path / "bad.json"
    save_workload(Workload(gpt_like(), Cluster.stages(2), "native"), work)
    data = _cut(gpt_like(), "h2.ln").to_dict()
    data["assignment"]["nope"] = "stage0"
    split.write_text(json.dumps(data))
    assert main(["export", str(work), "--split", str(split), "--to", "vllm", "--out", str(tmp_path / "o")]) == 2
    assert "unknown op 'nope'" in capsys.readouterr().err


def test_a_training_split_of_a_torch_model_runs_in_torchs_pipeline():
    torch = pytest.importorskip("torch")
    from placement_dsl.io.torch_export import from_module

    from .pipes import runs_as_planned

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

        def forward(self, x):
            return x + self.fc2(torch.relu(self.fc1(x)))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([Block() for _ in range(4)])
            self.head = torch.nn.Linear(8, 2)

        def forward(self, x):
            for b in self.layers:
                x = b(x)
            return self.head(x)

    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 8)
    g = from_module(model, (x,)).graph
    first = next(op.name for op in g.ops if (op.attrs.get("module") or "").startswith("layers.2"))
    t = _trained(_cut(g, first))
    spec = export(t, "torch-pipelining").data
    assert spec["split_spec"] == {"layers.2": "beginning"} and spec["num_stages"] == 2
    runs_as_planned(model, x, spec)


def test_a_split_of_the_other_view_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The split file is read once and tried on either view; before, it was read again for the other view."""
    from placement_dsl.io import workload as io_workload

    work, split, out = tmp_path / "gpt.json", tmp_path / "tr.json", tmp_path / "v.txt"
    save_workload(Workload(gpt_like(), Cluster.stages(2), "native"), work)
    split.write_text(json.dumps(_trained(_cut(gpt_like(), "h2.ln")).to_dict()))
    read = io_workload._read_json
    reads: list[Path] = []
    monkeypatch.setattr(io_workload, "_read_json", lambda path: reads.append(Path(path)) or read(path))
    assert main(["export", str(work), "--split", str(split), "--to", "vllm", "--out", str(out)]) == 0
    assert out.read_text() == "2,2\n"
    assert reads.count(split) == 1
