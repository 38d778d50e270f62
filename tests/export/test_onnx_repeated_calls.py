"""A module the model calls several times, exported to ONNX: the TorchScript exporter names its later calls
``block.0_1``, ``block.0_2`` (no module torch knows), the ``torch.export``-based one gives every call the module's
own name. The ONNX importer maps the call names back and records the module's calls as the torch importer does
(``op.attrs["shared_modules"]``), so torch-pipelining never splits at a module torch would cut at each call: a
split at ``block`` cut after each of its three calls and built 4 stages from a 2-stage plan."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import export, reused_modules
from placement_dsl.placement import Placement
from tests.export.pipes import runs_as_planned

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
nn = torch.nn


class LoopReuse(nn.Module):
    """One block applied three times in a loop (the same weights), each call with a residual sum, then a head."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.block = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        h = self.inp(x)
        for _ in range(3):
            h = h + self.block(h)
        return self.out(h)


class Residual(nn.Module):
    """A block with its own op (the residual sum) and one activation called twice, itself called twice."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.fc, self.act = nn.Linear(d, d), nn.ReLU()

    def forward(self, x):
        return self.act(x + self.act(self.fc(x)))


class Twice(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.inp, self.block, self.out = nn.Linear(d, d), Residual(d), nn.Linear(d, d)

    def forward(self, x):
        return self.out(self.block(self.block(self.inp(x)) * 2.0))


class Siblings(nn.Module):
    """Two modules really named ``conv`` and ``conv_1``, each called once."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.conv, self.act, self.conv_1 = nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d)

    def forward(self, x):
        return self.conv_1(self.act(self.conv(x)))


def _torchscript_onnx(model, x, path):
    from placement_dsl.io import onnx as onnx_io

    torch.onnx.export(model, (x,), str(path), dynamo=False)
    return onnx_io.load(path).graph


def _record(graph) -> dict:
    return {p: o for op in graph.ops for p, o in (op.attrs.get("shared_modules") or {}).items()}


def test_torchscript_call_names_map_back_and_the_calls_are_recorded_as_the_torch_importer_does(tmp_path):
    from placement_dsl.io.torch_export import from_module

    model, x = LoopReuse().eval(), torch.randn(2, 8)
    g = _torchscript_onnx(model, x, tmp_path / "loop.onnx")
    assert [op.attrs.get("module") for op in g.ops] == ["inp", *["block.0", "block.1", None] * 3, "out"]
    assert _record(g) == {"block": {"fqns": ["block"], "calls": 3}, "block.0": {"fqns": ["block.0"], "calls": 3},
                          "block.1": {"fqns": ["block.1"], "calls": 3}}
    assert _record(g) == _record(from_module(model, (x,)).graph)
    assert {"block", "block.0", "block.1"} <= reused_modules(Placement(g, Cluster.stages(1), [0] * g.n))


def test_torchscript_scopes_give_the_called_modules_under_their_real_names(tmp_path):
    """Each scope level of a TorchScript node name is a module call (``op.attrs["nn_module_stack"]``), a later call
    ``block.0_1`` read as ``block.0``: the called modules are the torch importer's, so the exporters and
    ``--boundaries module`` name no module torch lacks."""
    from placement_dsl.boundaries import called_modules
    from placement_dsl.io.torch_export import from_module

    model, x = LoopReuse().eval(), torch.randn(2, 8)
    g = _torchscript_onnx(model, x, tmp_path / "loop.onnx")
    stacks = [op.attrs.get("nn_module_stack") for op in g.ops]
    assert stacks == [["inp"], *[["block", "block.0"], ["block", "block.1"], None] * 3, ["out"]]
    assert called_modules(g) == called_modules(from_module(model, (x,)).graph) == {"inp", "block", "block.0",
                                                                                   "block.1", "out"}


def test_a_block_called_twice_with_its_own_op_and_a_sibling_really_named_with_a_suffix(tmp_path):
    from placement_dsl.io.torch_export import from_module

    model, x = Twice().eval(), torch.randn(2, 8)
    g = _torchscript_onnx(model, x, tmp_path / "twice.onnx")  # /block/act_1, /block/fc_1, /block_1/Add, /block/act_3
    assert {op.attrs.get("module") for op in g.ops} == {"inp", "block", "block.fc", "block.act", "out", None}
    assert _record(g) == _record(from_module(model, (x,)).graph) == {
        "block": {"fqns": ["block"], "calls": 2}, "block.fc": {"fqns": ["block.fc"], "calls": 2},
        "block.act": {"fqns": ["block.act"], "calls": 4}}
    g = _torchscript_onnx(Siblings().eval(), x, tmp_path / "siblings.onnx")  # conv_1 has its own weights
    assert [op.attrs.get("module") for op in g.ops] == ["conv", "act", "conv_1"] and not _record(g)


def _stages(graph, first_of_stage_1: str) -> Placement:
    k = graph.index[first_of_stage_1]
    return Placement(graph, Cluster.stages(2), [0] * k + [1] * (graph.n - k))


def test_a_split_after_a_module_called_three_times_is_refused_and_one_before_the_head_runs(tmp_path):
    """inp and the three calls of block | the last residual sum and out: the only split point is the end of 'block'
    (or of its last module), which torch cuts after each call. Moving the sum to stage 0, 'out' begins stage 1."""
    torch.manual_seed(0)
    model, x = LoopReuse().eval(), torch.randn(2, 8)
    g = _torchscript_onnx(model, x, tmp_path / "loop.onnx")
    with pytest.raises(SpecError, match=r"torch-pipelining: stage 1 begins after 'block', a module called more "
                                        r"than once"):
        export(_stages(g, "/Add_2"), "torch-pipelining")
    data = export(_stages(g, "/out/Gemm"), "torch-pipelining").data
    assert data["split_spec"] == {"out": "beginning"}
    runs_as_planned(model, x, data)


def _dynamo_like(path) -> None:
    """The ``torch.export``-based exporter's file for :class:`LoopReuse` (its name scopes, every call under the
    module's own name), written by hand: that exporter needs onnxscript."""
    from onnx import TensorProto, helper

    d = 16
    inits = [helper.make_tensor(n, TensorProto.FLOAT, s, [0.0] * (s[0] * (s[1] if len(s) > 1 else 1)))
             for n, s in [("inp.weight", [d, 8]), ("inp.bias", [d]), ("block.0.weight", [d, d]),
                          ("block.0.bias", [d]), ("out.weight", [4, d]), ("out.bias", [4])]]
    nodes, h, k = [], "h0", 0

    def node(op, ins, out, scopes):
        n = helper.make_node(op, ins, [out], name=f"node_{out}", **({"transB": 1} if op == "Gemm" else {}))
        n.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", *scopes, out]))
        nodes.append(n)

    node("Gemm", ["x", "inp.weight", "inp.bias"], "h0", ["inp"])
    for k in range(3):
        node("Gemm", [h, "block.0.weight", "block.0.bias"], f"lin{k}", ["block", "block.0"])
        node("Tanh", [f"lin{k}"], f"tanh{k}", ["block", "block.1"])
        node("Add", [h, f"tanh{k}"], f"add{k}", [])
        h = f"add{k}"
    node("Gemm", [h, "out.weight", "out.bias"], "y", ["out"])
    graph = helper.make_graph(nodes, "loop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def test_the_dynamo_exporters_calls_are_told_apart_by_the_program_order(tmp_path):
    from placement_dsl.io import onnx as onnx_io
    from placement_dsl.io.torch_export import from_module

    _dynamo_like(tmp_path / "loop.onnx")
    g = onnx_io.load(tmp_path / "loop.onnx").graph
    model, x = LoopReuse().eval(), torch.randn(2, 8)
    assert _record(g) == _record(from_module(model, (x,)).graph)
    with pytest.raises(SpecError, match=r"stage 1 begins after 'block', a module called more than once"):
        export(_stages(g, "node_add2"), "torch-pipelining")
    assert export(_stages(g, "node_y"), "torch-pipelining").data["split_spec"] == {"out": "beginning"}


class Basic(nn.Module):
    """torchvision's basic block: one ``relu`` module called before ``conv2`` and after the residual sum."""

    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.conv1, self.relu, self.conv2 = nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.relu(x + self.conv2(self.relu(self.conv1(x))))


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem, self.layer1, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Sequential(Basic(), Basic()), nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.fc(self.layer1(self.stem(x)))


def test_layers_of_a_module_called_around_another_are_one_per_call(tmp_path):
    """One layer per module made a cycle (relu -> conv2 -> relu) once the ONNX calls carry the module's name, as
    the torch importer's always did: each later call is a layer of its own, named as TorchScript names it."""
    from placement_dsl.io import onnx as onnx_io
    from placement_dsl.io.torch_export import from_module

    model, x = Stack().eval(), torch.randn(2, 3, 8, 8)
    torch.onnx.export(model, (x,), str(tmp_path / "stack.onnx"), dynamo=False)
    block = ["conv1", "relu", "conv2", "relu_1"]
    names = ["stem", *[f"layer1.{i}.{m}" for i in range(2) for m in block], "fc"]
    g = onnx_io.load(tmp_path / "stack.onnx", granularity="layer").graph
    assert list(g.names) == names == list(from_module(model, (x,), granularity="layer").graph.names)
    assert g.ops[g.index["layer1.0.relu_1"]].attrs["shared_modules"] == {"layer1.0.relu": {"fqns": ["layer1.0.relu"],
                                                                                           "calls": 2}}
    assert [op.name for op in onnx_io.load(tmp_path / "stack.onnx", granularity="layer", depth=2).graph.ops] == \
        ["stem", "layer1.0", "layer1.1", "fc"]


class BackToBack(nn.Module):
    """``block`` applied twice in a row, nothing between the calls: ``out(block(block(inp(x))))``."""

    def __init__(self, d: int = 16, block: str = "sequential") -> None:
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.block = {"sequential": lambda: nn.Sequential(nn.Linear(d, d), nn.Tanh()), "leaf": lambda: nn.Linear(d, d),
                      "weightless": lambda: nn.Sequential(nn.ReLU(), nn.Tanh())}[block]()
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        return self.out(self.block(self.block(self.inp(x))))


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("block", ["sequential", "leaf", "weightless"])
def test_a_block_called_twice_in_a_row_is_two_calls_and_its_plan_runs_with_the_planned_stages(tmp_path, block,
                                                                                              dynamo):
    """No op between the two calls: the TorchScript exporter names the second call's children ``block.0_1`` but not
    ``block`` itself, the dynamo exporter names neither. The calls are told apart by ``block.0`` reading its weight
    again in ``block``'s run, or ``block.0`` entered again after ``block.1`` (a Sequential calls each child once);
    read as one call, the split at 'block' made torch cut at both calls: 3 stages of a 2-stage plan."""
    from placement_dsl.io import onnx as onnx_io
    from placement_dsl.io.torch_export import from_module

    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    model, x = BackToBack(block=block).eval(), torch.randn(2, 8)
    torch.onnx.export(model, (x,), str(tmp_path / "b2b.onnx"), dynamo=dynamo)
    g = onnx_io.load(tmp_path / "b2b.onnx").graph
    assert _record(g) == _record(from_module(model, (x,)).graph)
    assert _record(g)["block"]["calls"] == 2
    first = next(op.name for op in g.ops if str(op.attrs.get("module") or "").startswith("block"))
    data = export(_stages(g, first), "torch-pipelining").data
    assert data["split_spec"] == {"inp": "end"}
    runs_as_planned(model, x, data)
