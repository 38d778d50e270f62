"""The torchtitan export read by torchtitan's own splitting rule (:mod:`tests.export.titan_rule`): every part it
writes keeps exactly its stage's parameters, or the plan is refused in one line naming the module. It wrote nested
names torchtitan keeps nothing of: a Llama's ``model.layers.N`` (the stages kept 0 / 0 / 1 parameters of 25 / 36 /
27, ``model`` dropped), a GPT's ``h.0.attn`` under ``--depth 3``, GPT-2's ``transformer.h.N``."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import export
from placement_dsl.placement import Placement
from tests.export.titan_rule import recorded, split_as_planned

from .test_export import _cut, gpt_like

torch = pytest.importorskip("torch")
nn = torch.nn


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), nn.Linear(d, d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """torchtitan's layout: the blocks are a ModuleList of the model's own (``h.N``)."""

    def __init__(self, n: int = 5, d: int = 8) -> None:
        super().__init__()
        self.wte, self.h = nn.Embedding(16, d), nn.ModuleList(Block(d) for _ in range(n))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, 16)

    def forward(self, idx):
        x = self.wte(idx)
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


class Inner(nn.Module):
    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.embed_tokens, self.layers = nn.Embedding(16, d), nn.ModuleList(Block(d) for _ in range(n))
        self.norm = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Llama(nn.Module):
    """Hugging Face's layout: the layers sit in a wrapper the model calls (``model.layers.N``), the head beside it."""

    def __init__(self, n: int = 5, d: int = 8) -> None:
        super().__init__()
        self.model, self.lm_head = Inner(n, d), nn.Linear(d, 16, bias=False)

    def forward(self, idx):
        return self.lm_head(self.model(idx))


class Features(nn.Module):
    """torchvision's layout: two Sequentials the model calls (``features.N``, ``classifier.N``)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.classifier = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        return self.classifier(torch.relu(self.features(x)))


class Iterated(nn.Module):
    """A Sequential the forward iterates instead of calling: never called, numbered, yet no list to torchtitan."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.inp, self.blocks, self.out = nn.Linear(d, d), nn.Sequential(*(Block(d) for _ in range(3))), nn.Linear(d, 4)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


class Named(nn.Module):
    """A ModuleDict of named blocks (split by its entries) beside a plain module whose children the forward calls
    directly (kept whole): both never called, both with named entries."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.stack = nn.ModuleDict({"enc": Block(d), "mid": Block(d), "dec": Block(d)})
        self.tail = nn.Module()
        self.tail.norm, self.tail.proj = nn.LayerNorm(d), nn.Linear(d, 4)

    def forward(self, x):
        x = self.inp(x)
        for block in self.stack.values():
            x = block(x)
        return self.tail.proj(self.tail.norm(x))


def _imported(make):
    from placement_dsl.io.torch_export import from_module

    torch.manual_seed(0)
    model = make().eval()
    x = (torch.randn(2, 8) if make is Features else torch.randn(2, 6, 8) if make in (Iterated, Named)
         else torch.randint(0, 16, (2, 6)))
    return model, from_module(model, (x,)).graph


def _at(graph, firsts: list[int]) -> Placement:
    assign = [sum(v >= f for f in firsts) for v in range(graph.n)]
    return Placement(graph, Cluster.stages(len(firsts) + 1), assign)


@pytest.mark.parametrize("make", [GPT, Llama, Features, Iterated, Named])
def test_every_two_stage_cut_is_split_as_planned_or_refused(make):
    """A cut before each op in turn: what is exported keeps, by torchtitan's rule, each stage's parameters."""
    model, g = _imported(make)
    exported = 0
    for k in range(1, g.n):
        p = _at(g, [k])
        try:
            parts = export(p, "torchtitan").data["module_fqns_per_model_part"]
        except SpecError as err:
            assert "\n" not in str(err) and str(err).startswith("torchtitan: ")
            continue
        split_as_planned(model, p, parts)
        exported += 1
    assert exported >= {GPT: 6, Llama: 1, Features: 1, Iterated: 2, Named: 3}[make]


def test_a_gpt_with_its_blocks_in_a_top_level_list_exports_uneven_three_stages():
    model, g = _imported(GPT)
    mods = [str(op.attrs.get("module") or "") for op in g.ops]
    p = _at(g, [mods.index("h.2.ln_1"), mods.index("h.4.ln_1")])
    parts = export(p, "torchtitan").data["module_fqns_per_model_part"]
    assert parts == [["wte", "h.0", "h.1"], ["h.2", "h.3"], ["h.4", "ln_f", "head"]]
    split_as_planned(model, p, parts)


def test_a_llama_whose_layers_sit_in_a_wrapper_is_refused_naming_it():
    """``model.layers.N``: torchtitan kept nothing of ``model`` on any stage but the one naming it whole."""
    _, g = _imported(Llama)
    mods = [str(op.attrs.get("module") or "") for op in g.ops]
    with pytest.raises(SpecError, match=r"^torchtitan: module 'model' runs on stages 0 and 1 .*a top-level module the "
                                        r"model calls, which holds 'model.layers'; .*02ef790"):
        export(_at(g, [mods.index("model.layers.2.ln_1"), mods.index("model.layers.4.ln_1")]), "torchtitan")
    # the wrapper whole on one stage and the head on the next is torchtitan's grammar
    assert export(_at(g, [mods.index("lm_head")]), "torchtitan").data["module_fqns_per_model_part"] == [
        ["model"], ["lm_head"]]


def test_a_cut_inside_a_block_and_a_depth_are_refused():
    """``--depth 3`` wrote ``h.0.attn``... (the stages kept 2 / 0 / 4 parameters of 38 / 36 / 28); a cut inside a
    block is one torchtitan cannot make at any depth."""
    _, g = _imported(GPT)
    mods = [str(op.attrs.get("module") or "") for op in g.ops]
    with pytest.raises(SpecError, match=r"^torchtitan: --depth 3 does not apply"):
        export(_at(g, [mods.index("h.2.ln_1")]), "torchtitan", depth=3)
    with pytest.raises(SpecError, match=r"^torchtitan: module 'h.2' runs on stages 0 and 1 .*an entry of the "
                                        r"top-level list 'h'"):
        export(_at(g, [mods.index("h.2.ln_2")]), "torchtitan")


def test_gpt2s_transformer_h_is_refused_naming_the_wrapper():
    """The docs' own example, ``transformer.h.N``: ``transformer`` is a module GPT-2 calls."""
    p = _cut(gpt_like(), "h2.ln")
    with pytest.raises(SpecError, match=r"records no module calls"):
        export(p, "torchtitan")
    p = Placement(recorded(p.graph, ("transformer.h",)), p.cluster, p.assign)
    with pytest.raises(SpecError, match=r"module 'transformer' runs on stages 0 and 1 .*which holds 'transformer.h'"):
        export(p, "torchtitan")


def test_virtual_stages_name_the_entries_of_the_top_level_list():
    model, g = _imported(GPT)
    mods = [str(op.attrs.get("module") or "") for op in g.ops]
    firsts = [mods.index(f"h.{i}.ln_1") for i in (1, 2, 3)]
    cut = _at(g, firsts)
    p = Placement(g, Cluster.stages(2), [int(d) % 2 for d in cut.assign])
    data = export(p, "torchtitan", schedule="interleaved-1f1b").data
    assert data["module_fqns_per_model_part"] == [["wte", "h.0"], ["h.1"], ["h.2"], ["h.3", "h.4", "ln_f", "head"]]
    assert data["stage_ranks"] == [0, 1, 0, 1]
    split_as_planned(model, cut, data["module_fqns_per_model_part"])


def test_the_torch_importer_records_which_never_called_children_are_lists():
    """An iterated Sequential is kept whole (torchtitan drops ``blocks.1`` of a Sequential), a ModuleDict is split by
    its named entries, a plain module whose children the forward calls is kept whole; an ONNX import, without the
    type, refuses the named entries rather than guess."""
    model, g = _imported(Iterated)
    mods = [str(op.attrs.get("module") or "") for op in g.ops]
    with pytest.raises(SpecError, match=r"^torchtitan: module 'blocks' runs on stages 0 and 1"):
        export(_at(g, [mods.index("blocks.1.ln_1")]), "torchtitan")
    p = _at(g, [mods.index("out")])
    assert export(p, "torchtitan").data["module_fqns_per_model_part"] == [["inp", "blocks"], ["out"]]
    model, g = _imported(Named)
    mods = [str(op.attrs.get("module") or "") for op in g.ops]
    p = _at(g, [mods.index("stack.mid.ln_1"), mods.index("tail.norm")])
    parts = export(p, "torchtitan").data["module_fqns_per_model_part"]
    assert parts == [["inp", "stack.enc"], ["stack.mid", "stack.dec"], ["tail"]]
    split_as_planned(model, p, parts)
    untyped = recorded(p.graph, ("stack", "tail"))  # the call record alone, as an ONNX import leaves it
    with pytest.raises(SpecError, match=r"^torchtitan: module 'stack' is never called and holds named entries"):
        export(Placement(untyped, p.cluster, p.assign), "torchtitan")
