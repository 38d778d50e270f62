"""Stages counted in repeated layers, the unit of Megatron-LM, vLLM and DeepSpeed pipelines.

The layer list is found from the module names: the dotted prefix followed by the most distinct
integers (``transformer.h`` of ``transformer.h.N``, ``model.layers`` of ``model.layers.N``,
``encoder.layer`` of ``encoder.layer.N``, torchvision's ``encoder.layers.encoder_layer_N``). Ops
before the first layer are the *embedding*, ops after the last the *head* (final norm, LM head,
loss); both must sit on the end stages, where these runtimes put them, and no stage boundary may
cut a layer. Ops of no module (an exporter's
helpers, like the dynamo exporter's ``Split`` of a fused QKV output) go with their neighbours.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SpecError
from ..placement import Placement
from .plan import Stage, op_name, pipeline_stages

_SUFFIXED = re.compile(r"^(.+_)(\d+)$")


@dataclass(frozen=True)
class LayerStages:
    """A pipeline counted in layers: ``counts[k]`` layers on stage ``k`` of ``len(counts)``."""

    prefix: str
    layers: int
    counts: tuple[int, ...]
    embedding: bool
    head: bool

    @property
    def parts(self) -> list[int]:
        """Layer-index boundaries: stage ``k`` holds layers ``parts[k]`` to ``parts[k + 1] - 1``."""
        out = [0]
        for c in self.counts:
            out.append(out[-1] + c)
        return out


def layer_lists(paths: list[str]) -> dict[str, set[int]]:
    """Every prefix among module ``paths`` followed by an integer, with the integers that follow it.

    A layer is a dotted part of integers (``transformer.h`` of ``transformer.h.3``) or a name ending in ``_``
    and an integer (``encoder.layers.encoder_layer_`` of torchvision's ``encoder.layers.encoder_layer_3``).
    """
    found: dict[str, set[int]] = {}
    for path in paths:
        parts = path.split(".")
        for i, part in enumerate(parts):
            if part.isdigit() and i:
                found.setdefault(".".join(parts[:i]), set()).add(int(part))
            elif m := _SUFFIXED.match(part):
                found.setdefault(".".join([*parts[:i], m.group(1)]), set()).add(int(m.group(2)))
    return found


def layer_prefix(paths: list[str]) -> str | None:
    """The prefix of the repeated layer list among module ``paths``: the one with most distinct indices (>= 2),
    dotted integers first among equals."""
    best = max(layer_lists(paths).items(), key=lambda kv: (len(kv[1]), not kv[0].endswith("_"), -len(kv[0])),
               default=None)
    return best[0] if best and len(best[1]) >= 2 else None


def layer_name(prefix: str, i: int) -> str:
    """The module path of layer ``i`` of the list ``prefix`` (``transformer.h.3``, ``encoder.layers.encoder_layer_3``).

    >>> layer_name("transformer.h", 3), layer_name("encoder.layers.encoder_layer_", 3)
    ('transformer.h.3', 'encoder.layers.encoder_layer_3')
    """
    return f"{prefix}{i}" if prefix.endswith("_") else f"{prefix}.{i}"


def layer_depth(prefix: str) -> int:
    """The dotted parts of a layer's module path in the list ``prefix``."""
    return prefix.count(".") + (1 if prefix.endswith("_") else 2)


def check_transformer_layers(placement: Placement, prefix: str, runtime: str) -> None:
    """Refuse a layer list a runtime that repeats one transformer layer (Megatron-LM, vLLM) cannot build.

    Its layers must be alike, running the same op types in the same order (a CNN's ``features.N`` are a
    stem, blocks of several widths and a final convolution), and it must be the model's only list of
    layers outside its own layers (an encoder-decoder's second list would be counted as the embedding or
    the head).
    """
    g = placement.graph
    paths = [str(op.attrs.get("module") or "") for op in g.ops]
    kinds: dict[int, list[str]] = {}
    for op, path in zip(g.ops, paths):
        i = _layer_index(path, prefix)
        if i is not None:
            kinds.setdefault(i, []).append(str(op.attrs.get("type", "")))
    first = min(kinds)
    for i in sorted(kinds):
        if kinds[i] != kinds[first]:
            raise SpecError(f"{runtime}: the layers of {prefix!r} are not alike ({layer_name(prefix, first)} runs "
                            f"{len(kinds[first])} ops, {layer_name(prefix, i)} {len(kinds[i])} ops of other types "
                            f"or order); {runtime} repeats one transformer layer (export to deepspeed or "
                            f"torch-pipelining)")
    for other, found in sorted(layer_lists([p for p in paths if p]).items(), key=lambda kv: kv[0].endswith("_")):
        if len(found) >= 2 and other != prefix and _layer_index(other, prefix) is None \
                and not prefix.startswith(other + "."):
            raise SpecError(f"{runtime}: the model has a second layer list {other!r} beside {prefix!r} (an "
                            f"encoder-decoder or stages of blocks); {runtime} pipelines one list of layers "
                            f"(export to deepspeed or torch-pipelining)")


def _layer_index(path: str | None, prefix: str) -> int | None:
    lead = prefix if prefix.endswith("_") else prefix + "."
    if not path or not path.startswith(lead):
        return None
    head = path[len(lead):].split(".")[0]
    return int(head) if head.isdigit() else None


def layer_stages(placement: Placement, runtime: str, virtual: bool = False, transformer: bool = False) -> LayerStages:
    """The layers per stage of ``placement`` for ``runtime``, refusing what it cannot run (see the module);
    ``virtual``: stages round-robin over the ranks (:func:`~placement_dsl.export.plan.pipeline_stages`);
    ``transformer``: the runtime repeats one transformer layer (:func:`check_transformer_layers`)."""
    stages = pipeline_stages(placement, runtime, virtual)
    g = placement.graph
    paths = [str(op.attrs.get("module") or "") for op in g.ops]
    prefix = layer_prefix([p for p in paths if p])
    if prefix is None:
        raise SpecError(f"{runtime}: graph {g.name!r} has no repeated layer list in its module paths (like "
                        f"transformer.h.N or model.layers.N); import it with module paths, or export to torch-pipelining")
    if transformer:
        check_transformer_layers(placement, prefix, runtime)
    stage_of: dict[int, Stage] = {}
    first_layer_of: dict[int, int] = {}
    counts = [0] * len(stages)
    embedding = head = False
    seen_layer = False
    for s in stages:
        for v in s.ops:
            if not paths[v]:  # an op of no module (an exporter's helper) goes with its neighbours
                continue
            i = _layer_index(paths[v], prefix)
            if i is None:
                where = "head" if seen_layer else "embedding"
                end = len(stages) - 1 if seen_layer else 0
                if s.index != end:
                    raise SpecError(f"{runtime}: op {op_name(g.ops[v])!r} of the {where} runs on stage {s.index}; "
                                    f"{runtime} keeps the {where} on stage {end}")
                head, embedding = head or seen_layer, embedding or not seen_layer
                continue
            seen_layer = True
            if i in stage_of and stage_of[i].index != s.index:
                raise SpecError(f"{runtime}: layer '{layer_name(prefix, i)}' is cut between stages "
                                f"{stage_of[i].index} and {s.index} (at op {op_name(g.ops[v])!r}); {runtime} splits "
                                f"only between layers")
            if i not in stage_of:
                stage_of[i] = s
                first_layer_of[i] = v
                counts[s.index] += 1
    order = list(stage_of)
    if order != sorted(order) or order != list(range(len(order))):
        raise SpecError(f"{runtime}: the layers of {prefix!r} run in the order {order[:8]}...; expected 0..{len(order) - 1}")
    return LayerStages(prefix, len(order), tuple(counts), embedding, head)
