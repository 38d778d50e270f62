"""The layer list of the layer runtimes is the model's sequence of modules, on small torch models built here:
blocks of a ``ModuleList`` (not the sublayers of one block), or, without one such list, the modules the model
calls in order; nothing that runs between the layers goes into the embedding or the head."""
from __future__ import annotations

from itertools import pairwise

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import export
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement

torch = pytest.importorskip("torch")
nn = torch.nn


class Blocks(nn.Module):
    """An input projection, a ``ModuleList`` of 3 blocks of 4 sublayers each, residuals, two heads on halves."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.inp = nn.Linear(6, d)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
                                    for _ in range(3))
        self.head_a = nn.Linear(d // 2, 3)
        self.head_b = nn.Linear(d // 2, 3)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        a, c = torch.chunk(h, 2, dim=-1)
        return self.head_a(a).sum(-1) + self.head_b(c).sum(-1)


class SmallConv(nn.Module):
    """``stem``, ``b1`` (with a residual), ``b2``, ``fc``: no list of layers, four top-level modules."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.b1 = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
        self.b2 = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.b1(x)
        x = self.b2(x)
        return self.fc(x.mean(dim=(2, 3)))


def _cut_before(model, x, module: str) -> Placement:
    from placement_dsl.io.torch_export import from_module

    g = from_module(model, (x,)).graph
    k = next(i for i, op in enumerate(g.ops) if str(op.attrs.get("module") or "").startswith(module))
    return Placement(g, Cluster.stages(2), [0] * k + [1] * (g.n - k))


def test_deepspeed_lists_the_blocks_of_a_module_list():
    data = export(_cut_before(Blocks(), torch.randn(2, 5, 6), "blocks.2"), "deepspeed").data
    assert data["layers"] == ["embedding", "blocks.0", "blocks.1", "blocks.2", "head"]
    assert data["parts"] == [0, 3, 5] and data["layer_list"] == "blocks"


def test_megatron_counts_the_blocks_of_a_module_list():
    data = export(_cut_before(Blocks(), torch.randn(2, 5, 6), "blocks.2"), "megatron").data
    assert data["pipeline_model_parallel_layout"] == "Et*2|tL" and data["num_layers"] == 3


def test_deepspeed_lists_the_called_modules_of_a_model_without_a_layer_list():
    data = export(_cut_before(SmallConv(), torch.randn(1, 3, 8, 8), "b2"), "deepspeed").data
    assert data["layers"] == ["stem", "b1", "b2", "fc"] and data["parts"] == [0, 2, 4]
    assert data["layer_list"] is None and data["depth"] == 1


def test_a_module_between_layers_is_not_counted_as_the_head():
    rows = [("e", "emb"), ("l0", "layers.0"), ("x", "mixer"), ("l1", "layers.1"), ("l2", "layers.2"), ("o", "out")]
    ops = [Op(name=n, work=1.0, out_bytes=1.0, attrs={"module": m, "type": "linear"}) for n, m in rows]
    g = Graph(ops, [(a[0], b[0]) for a, b in pairwise(rows)], name="g")
    p = Placement(g, Cluster.stages(2), [0, 0, 0, 0, 1, 1])
    with pytest.raises(SpecError, match=r"vllm: module 'mixer' runs between layers of 'layers'"):
        export(p, "vllm")
    data = export(p, "deepspeed").data
    assert data["layers"] == ["emb", "layers.0", "mixer", "layers.1", "layers.2", "out"] and data["parts"] == [0, 4, 6]
