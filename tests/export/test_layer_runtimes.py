"""Megatron-LM and vLLM repeat one transformer layer: a layer list they cannot build is refused with the reason,
while DeepSpeed, whose layers may be any modules, still takes it."""
from __future__ import annotations

from itertools import pairwise

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import export
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement

from .titan_rule import recorded


def _chain(rows: list[tuple[str, str, str]], cut: str) -> Placement:
    """A chain of ops (name, module path, op type) in execution order, cut into two stages before ``cut``."""
    ops = [Op(name=n, work=1.0, out_bytes=1.0, attrs={"module": m, "type": t}) for n, m, t in rows]
    g = Graph(ops, [(a[0], b[0]) for a, b in pairwise(rows)], name="g")
    k = [n for n, _, _ in rows].index(cut)
    return Placement(g, Cluster.stages(2), [0] * k + [1] * (len(rows) - k))


def _block(p: str, kinds: tuple[str, ...]) -> list[tuple[str, str, str]]:
    return [(f"{p}.{i}", f"{p}.op{i}", kind) for i, kind in enumerate(kinds)]


def cnn() -> Placement:
    """mobilenet's ``features.N``: a stem, inverted residual blocks, a last convolution; then the classifier."""
    rows = _block("features.0", ("convolution", "batch_norm", "hardtanh"))
    for i in (1, 2):
        rows += _block(f"features.{i}", ("convolution", "batch_norm", "hardtanh", "convolution", "batch_norm"))
    rows += _block("features.3", ("convolution", "batch_norm", "hardtanh")) + [("fc", "classifier", "linear")]
    return _chain(rows, "features.2.0")


def encoder_decoder() -> Placement:
    """Alike layers in two lists, ``encoder.layers.N`` and ``decoder.layers.N``, and an output projection."""
    layer = ("layer_norm", "linear", "softmax", "linear")
    rows = [("emb", "emb", "embedding")]
    for side in ("encoder", "decoder"):
        for i in (0, 1):
            rows += _block(f"{side}.layers.{i}", layer)
    return _chain(rows + [("out", "out", "linear")], "decoder.layers.0.0")


@pytest.mark.parametrize("to", ["megatron", "vllm"])
def test_layers_that_are_not_alike_are_refused_by_the_transformer_runtimes(to):
    with pytest.raises(SpecError, match=rf"{to} assigns transformer layers: the model has no repeated layer list "
                                        rf"\(found 'features' of 4 unlike layers; the closest, 'features', has layers "
                                        rf"that are not alike \(features.0 runs 3 ops, features.1 5 ops"):
        export(cnn(), to)


@pytest.mark.parametrize("to", ["megatron", "vllm"])
def test_a_second_layer_list_is_refused_by_the_transformer_runtimes(to):
    with pytest.raises(SpecError, match=rf"{to} assigns transformer layers: the model has no repeated layer list "
                                        rf"\(found '(de|en)coder.layers' of 2 layers, '(de|en)coder.layers' of 2 "
                                        rf"layers; the closest, .* has the list '(de|en)coder.layers' beside it"):
        export(encoder_decoder(), to)


@pytest.mark.parametrize("to", ["megatron", "vllm"])
def test_a_cnn_of_a_stem_and_stages_of_blocks_is_refused_naming_what_the_runtime_needs(to):
    """A small CNN's ``stem.N`` (conv, norm + act, pool), ``b1.N`` and ``b2.N``: the runtimes need one repeated
    list of transformer layers, which this model has not; the refusal says that and names every list (it said
    only that the layers of 'stem' are not alike, as if 'stem' were the model's layers). The closest list is
    the longest of alike layers, ``b2``."""
    rows = [("s0", "stem.0", "convolution"), ("s1", "stem.1", "batch_norm"), ("s1r", "stem.1", "relu"),
            ("s2", "stem.2", "max_pool2d")]
    rows += _block("b1.0", ("convolution", "relu", "convolution")) + _block("b1.1", ("convolution", "relu"))
    rows += _block("b2.0", ("convolution", "relu")) + _block("b2.1", ("convolution", "relu"))
    rows += [("fc", "fc", "linear")]
    with pytest.raises(SpecError) as err:
        export(_chain(rows, "b2.0.0"), to)
    assert str(err.value) == (
        f"{to} assigns transformer layers: the model has no repeated layer list (found 'stem' of 3 unlike layers, "
        "'b1' of 2 unlike layers, 'b2' of 2 layers; the closest, 'b2', has the list 'stem' beside it (an "
        "encoder-decoder or stages of blocks)); export to deepspeed or torch-pipelining")


def test_deepspeed_takes_any_layers():
    assert export(cnn(), "deepspeed").data["parts"] == [0, 2, 5]
    assert export(encoder_decoder(), "deepspeed").data["num_stages"] == 2


def test_torchtitan_refuses_a_split_inside_a_module_the_model_calls():
    """densenet's blocks are ``features.denseblockN`` inside the Sequential ``features``, which torchtitan keeps whole
    or drops: the export listed ``features.denseblock1``..., names torchtitan keeps nothing of."""
    rows = [("c0", "features.denseblock1.conv", "convolution"), ("c1", "features.transition1.conv", "convolution"),
            ("c2", "features.denseblock2.conv", "convolution"), ("fc", "classifier", "linear")]
    p = _chain(rows, "c2")
    p = Placement(recorded(p.graph), p.cluster, p.assign)
    with pytest.raises(SpecError, match=r"^torchtitan: module 'features' runs on stages 0 and 1 \(op 'c2' of "
                                        r"'features.denseblock2.conv'\), a top-level module the model calls, which "
                                        r"holds 'features.denseblock2'"):
        export(p, "torchtitan")
    with pytest.raises(SpecError, match=r"^torchtitan: --depth 1 does not apply"):
        export(p, "torchtitan", depth=1)
    rows[-2:-1] = [("c2", "head.denseblock2.conv", "convolution")]  # the cut between top-level modules
    p = _chain(rows, "c2")
    assert export(Placement(recorded(p.graph), p.cluster, p.assign), "torchtitan").data[
        "module_fqns_per_model_part"] == [["features"], ["head", "classifier"]]


def vit() -> Placement:
    """torchvision's ViT: layers named ``encoder.layers.encoder_layer_N`` (no integer part of their own), each with
    an MLP ``mlp.0``, ``mlp.1``, ``mlp.3`` whose integers must not be taken for the layer list."""
    rows = [("conv", "conv_proj", "convolution"), ("pos", "encoder", "add")]
    for i in range(4):
        p = f"encoder.layers.encoder_layer_{i}"
        rows += [(f"l{i}.ln", f"{p}.ln_1", "layer_norm"), (f"l{i}.attn", f"{p}.self_attention", "attention"),
                 (f"l{i}.fc1", f"{p}.mlp.0", "linear"), (f"l{i}.gelu", f"{p}.mlp.1", "gelu"),
                 (f"l{i}.fc2", f"{p}.mlp.3", "linear"), (f"l{i}.add", p, "add")]
    rows += [("ln", "encoder.ln", "layer_norm"), ("head", "heads.head", "linear")]
    return _chain(rows, "l2.ln")


def test_layers_named_with_an_integer_suffix_are_the_layer_list():
    p = vit()
    assert export(p, "vllm").text == "2,2\n"
    assert export(p, "megatron").data["pipeline_model_parallel_layout"] == "Et*2|t*2L"
    assert export(p, "deepspeed").data["layers"][1:3] == ["encoder.layers.encoder_layer_0",
                                                           "encoder.layers.encoder_layer_1"]
    with pytest.raises(SpecError, match=r"torchtitan: module 'encoder' runs on stages 0 and 1 .*which holds "
                                        r"'encoder.layers'"):  # torchvision's ViT calls its encoder
        export(Placement(recorded(p.graph), p.cluster, p.assign), "torchtitan")
