"""One ``nn.Module`` under two names (a tied encoder and decoder, a GPT whose LM head is its embedding): torch's
``pipeline()`` cuts before every call of a split point's module object, so a split point at ``dec`` cut before
``enc`` too and built 4 stages from a 3-stage plan. The importer records the object's names and calls; the exporters
take another name of the same point of the program, called once, or refuse naming the module and its aliases."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import export, reused_modules
from placement_dsl.placement import Placement
from tests.export.pipes import runs_as_planned

torch = pytest.importorskip("torch")
nn = torch.nn


class EncDec(nn.Module):
    """``dec`` is ``enc``: one Linear registered under two names and called under both."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.enc = nn.Linear(d, d)
        self.mid = nn.Sequential(nn.ReLU(), nn.Linear(d, d), nn.ReLU())
        self.dec = self.enc
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        return self.out(self.dec(self.mid(self.enc(self.inp(x)))))


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention and an MLP, each with a residual sum."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln_1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        q, k, v = self.qkv(self.ln_1(x)).chunk(3, dim=-1)
        x = x + self.proj(nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
        return x + self.mlp(self.ln_2(x))


class TiedGPT(nn.Module):
    """A GPT over feature vectors whose LM head is its input embedding (``lm_head`` is ``embed``); with
    ``tie="weight"`` the usual tie of token embedding and head weights (two modules, one parameter)."""

    def __init__(self, tie: str = "module", d: int = 16, vocab: int = 32, layers: int = 3) -> None:
        super().__init__()
        self.tie = tie
        self.embed = nn.Linear(d, d, bias=False) if tie == "module" else nn.Embedding(vocab, d)
        self.h = nn.ModuleList(Block(d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = self.embed if tie == "module" else nn.Linear(d, vocab, bias=False)
        if tie == "weight":
            self.lm_head.weight = self.embed.weight

    def forward(self, x):
        x = self.embed(x)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _placed(model, x, starts: list[str]) -> Placement:
    """Stages beginning at the first op of each module in ``starts`` (in the model's op order), the model read by
    the torch importer."""
    from placement_dsl.io.torch_export import from_module

    return _staged(from_module(model, (x,)).graph, starts)


def _staged(g, starts: list[str]) -> Placement:
    """Stages of graph ``g`` beginning at the first op of each module in ``starts`` (program order)."""
    stage, assign = 0, []
    for op in g.ops:
        module = str(op.attrs.get("module") or "")
        if stage < len(starts) and (module == starts[stage] or module.startswith(starts[stage] + ".")):
            stage += 1
        assign.append(stage)
    return Placement(g, Cluster.stages(len(starts) + 1), assign)


def test_the_importer_records_a_modules_names_and_calls():
    from placement_dsl.io.torch_export import from_module

    g = from_module(EncDec().eval(), (torch.randn(2, 8),)).graph
    shared = {p: o for op in g.ops for p, o in (op.attrs.get("shared_modules") or {}).items()}
    assert shared == {"enc": {"fqns": ["dec", "enc"], "calls": 2}, "dec": {"fqns": ["dec", "enc"], "calls": 2}}
    assert {"enc", "dec"} <= reused_modules(Placement(g, Cluster.stages(1), [0] * g.n))


def test_a_split_at_a_tied_decoder_takes_the_end_of_the_module_before():
    """inp+enc | mid | dec+out: 'dec' is 'enc', so stage 2 begins after mid's last module (mid itself begins stage
    1): torch builds the 3 planned stages, not 4, and they compute the model's output."""
    torch.manual_seed(0)
    model, x = EncDec().eval(), torch.randn(4, 8)
    data = export(_placed(model, x, ["mid", "dec"]), "torch-pipelining").data
    assert data["split_spec"] == {"mid": "beginning", "mid.2": "end"}
    assert data["tied_modules"] == [{"fqns": ["dec", "enc"], "stages": [0, 2]}]
    runs_as_planned(model, x, data)


def test_a_gpt_whose_lm_head_is_its_embedding_splits_before_the_head_once():
    """The blocks and final norm on stage 0, the LM head (which is the embedding) on stage 1: a split point at
    'lm_head' cut before the embedding too, 3 stages for 2; the end of 'ln_f' is the same point, cut once."""
    torch.manual_seed(0)
    model, x = TiedGPT("module").eval(), torch.randn(2, 5, 16)
    placement = _placed(model, x, ["lm_head"])
    data = export(placement, "torch-pipelining").data
    assert data["split_spec"] == {"ln_f": "end"}
    assert data["tied_modules"] == [{"fqns": ["embed", "lm_head"], "stages": [0, 1]}]
    runs_as_planned(model, x, data)
    parts = export(placement, "torchtitan").data
    assert parts["module_fqns_per_model_part"][-1] == ["lm_head"] and parts["tied_modules"] == data["tied_modules"]


def test_a_gpt_with_tied_weights_splits_as_planned():
    """Two modules sharing one weight are no aliases: the head's own name is the split point."""
    torch.manual_seed(0)
    model, x = TiedGPT("weight").eval(), torch.randint(0, 32, (2, 5))
    data = export(_placed(model, x, ["h.2", "lm_head"]), "torch-pipelining").data
    assert data["split_spec"] == {"h.2": "beginning", "lm_head": "beginning"} and data["tied_modules"] == []
    runs_as_planned(model, x, data)


class Autoencoder(nn.Module):
    """``dec`` is ``enc`` and runs right after it (after the root's own ``relu``): no other module begins or ends
    between the two calls."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.enc = nn.Linear(d, d)
        self.dec = self.enc

    def forward(self, x):
        return self.dec(torch.relu(self.enc(x)))


def test_a_split_that_only_an_aliased_module_names_is_refused_naming_its_aliases():
    from placement_dsl.io.torch_export import from_module

    g = from_module(Autoencoder().eval(), (torch.randn(2, 16),)).graph
    assign = [0 if op.attrs.get("type") == "linear" and i == 0 else 1 for i, op in enumerate(g.ops)]
    with pytest.raises(SpecError, match=r"torch-pipelining: stage 1 begins after 'enc', one module object also named "
                                        r"'dec' and called 2 times in all") as err:
        export(Placement(g, Cluster.stages(2), assign), "torch-pipelining")
    assert "\n" not in str(err.value)


class SharedLayers(nn.Module):
    """ALBERT-like: the layer list holds one block twice (``h.0`` is ``h.2``)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.embed = nn.Linear(8, d)
        first, second = Block(d), Block(d)
        self.h = nn.ModuleList([first, second, first])
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        x = self.embed(x)
        for block in self.h:
            x = block(x)
        return self.head(x)


@pytest.mark.parametrize("to", ["megatron", "vllm"])
def test_a_layer_list_holding_one_block_twice_is_refused_by_layer_runtimes(to):
    model, x = SharedLayers().eval(), torch.randn(2, 5, 8)
    with pytest.raises(SpecError, match=rf"{to}: layer 'h.0' is one module object with 'h.2'; {to} builds every "
                                        r"layer with its own weights"):
        export(_placed(model, x, ["h.1"]), to)


def test_a_workload_imported_before_the_module_record_is_refused_saying_to_re_import(tmp_path, capsys):
    """A file the importers wrote before they recorded shared modules carries no record, which read as "every module
    called once": a split at 'dec' (which is 'enc') was exported as is and torch cut the model at both calls."""
    import json

    from placement_dsl.cli import main
    from placement_dsl.io import Workload, save_workload
    from placement_dsl.io.torch_export import from_module

    torch.manual_seed(0)
    w = from_module(EncDec().eval(), (torch.randn(4, 8),))
    assert w.meta["module_calls"] == 1
    split = tmp_path / "split.json"
    split.write_text(json.dumps(_placed(EncDec().eval(), torch.randn(4, 8), ["mid", "dec"]).to_dict()))
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    save_workload(Workload(w.graph, Cluster.stages(3), "torch", w.meta), new)
    ops = [op.model_copy(update={"attrs": {k: v for k, v in op.attrs.items() if k != "shared_modules"}})
           for op in w.graph.ops]
    meta = {k: v for k, v in w.meta.items() if k != "module_calls"}
    save_workload(Workload(w.graph.replace(ops=ops), Cluster.stages(3), "torch", meta), old)
    out = tmp_path / "spec.json"
    assert main(["export", str(new), "--split", str(split), "--to", "torch-pipelining", "--out", str(out)]) == 0
    capsys.readouterr()
    for command in (["export", str(old), "--split", str(split), "--to", "torch-pipelining", "--out", str(out)],
                    ["solve", str(old), "--method", "dp", "--boundaries", "module"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "old.json" in err and "re-import" in err, err


def _onnx_graph(model, x, path, dynamo: bool):
    from placement_dsl.io import onnx as onnx_io

    pytest.importorskip("onnx")
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.onnx.export(model, (x,), str(path), dynamo=dynamo)
    return onnx_io.load(path).graph


def test_a_tied_decoder_read_from_the_dynamo_onnx_file_is_recorded_and_cut_right(tmp_path):
    """The dynamo exporter names the calls 'enc' and 'dec' and gives the object's weights one initializer,
    'dec.weight', which both calls read: read as two modules called once each, the split at 'dec' was exported as is
    and torch cut before 'enc' too (4 stages of a 3-stage plan). The importer records the alias as the torch
    importer does, and the split takes the end of 'mid'."""
    torch.manual_seed(0)
    model, x = EncDec().eval(), torch.randn(4, 8)
    g = _onnx_graph(model, x, tmp_path / "encdec.onnx", dynamo=True)
    shared = {p: o for op in g.ops for p, o in (op.attrs.get("shared_modules") or {}).items()}
    assert shared == {"enc": {"fqns": ["dec", "enc"], "calls": 2}, "dec": {"fqns": ["dec", "enc"], "calls": 2}}
    data = export(_staged(g, ["mid", "dec"]), "torch-pipelining").data
    assert data["split_spec"] == {"mid": "beginning", "mid.2": "end"}
    assert data["tied_modules"] == [{"fqns": ["dec", "enc"], "stages": [0, 2]}]
    runs_as_planned(model, x, data)


def test_a_tied_decoder_read_from_the_torchscript_onnx_file_is_a_second_call_and_cut_right(tmp_path):
    """The TorchScript exporter names the second call 'enc_1' (no 'dec' anywhere in the file): one module called
    twice, and the split at that call takes the end of 'mid' too."""
    torch.manual_seed(0)
    model, x = EncDec().eval(), torch.randn(4, 8)
    g = _onnx_graph(model, x, tmp_path / "encdec.onnx", dynamo=False)
    shared = {p: o for op in g.ops for p, o in (op.attrs.get("shared_modules") or {}).items()}
    assert shared == {"enc": {"fqns": ["enc"], "calls": 2}}
    k = [i for i, op in enumerate(g.ops) if op.attrs.get("module") == "enc"][1]  # the second call's op
    m = next(i for i, op in enumerate(g.ops) if op.attrs.get("module") == "mid.0")
    placement = Placement(g, Cluster.stages(3), [0] * m + [1] * (k - m) + [2] * (g.n - k))
    data = export(placement, "torch-pipelining").data
    assert data["split_spec"] == {"mid": "beginning", "mid.2": "end"}
    runs_as_planned(model, x, data)


class TiedHead(nn.Module):
    """A token embedding and an LM head sharing one matrix (two modules, one parameter), with two fresh LayerNorms
    between them (equal weights, which the TorchScript exporter gives one initializer)."""

    def __init__(self, vocab: int = 32, d: int = 16) -> None:
        super().__init__()
        self.embed, self.ln_a, self.mid, self.ln_b = nn.Embedding(vocab, d), nn.LayerNorm(d), nn.Linear(d, d), nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.ln_b(self.mid(self.ln_a(self.embed(x)))))


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_modules_sharing_a_weight_but_computing_otherwise_are_no_aliases_in_onnx(tmp_path, dynamo):
    """The tied embedding and LM head read one matrix, a lookup and a product: two objects, no alias recorded (nor
    for the two LayerNorms that the TorchScript exporter's one initializer of their equal weights joins)."""
    torch.manual_seed(0)
    model, x = TiedHead().eval(), torch.randint(0, 32, (2, 5))
    g = _onnx_graph(model, x, tmp_path / "tied.onnx", dynamo=dynamo)
    assert {"embed", "head", "ln_a", "ln_b"} <= {op.attrs.get("module") for op in g.ops}
    shared = {p: o for op in g.ops for p, o in (op.attrs.get("shared_modules") or {}).items()}
    assert shared == {}, shared
