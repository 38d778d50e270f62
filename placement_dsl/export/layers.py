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

from .. import boundaries
from ..errors import SpecError
from ..placement import Placement
from .plan import Stage, forward_view, op_name, pipeline_stages, split_modules, whole_modules

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


def outer_layer_lists(paths: list[str]) -> dict[str, set[int]]:
    """:func:`layer_lists` of at least two layers that lie inside no layer of another: ``blocks`` of
    ``blocks.N.M``, not the sublayers ``blocks.N`` of one block (however many more of them each block holds), nor
    an MoE layer's ``model.layers.N.mlp.experts``."""
    lists = {p: found for p, found in layer_lists(paths).items() if len(found) >= 2}
    return {p: found for p, found in lists.items()
            if not any(q != p and _layer_index(p, q) is not None for q in lists)}


def layer_prefix(paths: list[str]) -> str | None:
    """The prefix of the repeated layer list among module ``paths``: of the :func:`outer_layer_lists`, the one with
    most distinct indices, dotted integers first among equals."""
    best = max(outer_layer_lists(paths).items(), key=lambda kv: (len(kv[1]), not kv[0].endswith("_"), -len(kv[0])),
               default=None)
    return best[0] if best else None


def other_layer_lists(paths: list[str], prefix: str) -> list[str]:
    """The :func:`outer_layer_lists` beside ``prefix`` (neither it nor one of its containers): an
    encoder-decoder's second list, or a network built of several stages of blocks."""
    return sorted((p for p in outer_layer_lists(paths) if p != prefix and not prefix.startswith(p + ".")),
                  key=lambda p: p.endswith("_"))


def outside_between(paths: list[str], prefix: str) -> str | None:
    """A module path outside the list ``prefix`` (nor one of its containers) that runs between two of its layers
    in ``paths`` (execution order): which neither the embedding before the layers nor the head after them holds."""
    seen_layer, outside = False, None
    for path in paths:
        if not path:
            continue
        if _layer_index(path, prefix) is not None:
            if seen_layer and outside is not None:
                return outside
            seen_layer = True
        elif seen_layer and outside is None and not prefix.startswith(path + "."):
            outside = path
    return None


def sole_layer_list(paths: list[str]) -> str | None:
    """The layer list that holds the model between its embedding and its head: :func:`layer_prefix` when it is
    the only outer list and no other module runs between two of its layers (``None`` otherwise: TinyConv's
    ``stem``, ``b1``, ``b2`` are no layers of one list, and a ResNet's ``layer1`` to ``layer4`` are four)."""
    prefix = layer_prefix(paths)
    if prefix is None or other_layer_lists(paths, prefix) or outside_between(paths, prefix):
        return None
    return prefix


def modules_per_stage(placement: Placement, stages: list[Stage], runtime: str, depth: int | None = None,
                      prefix: str | None = None) -> tuple[list[list[str]], int]:
    """Each stage's modules in execution order and their depth: at ``depth`` if given, else at the depth of the
    layers of the list ``prefix`` (1, the model's own children, without one), or the first deeper one that no
    stage boundary cuts (``features.denseblock3`` where the split falls inside ``features``)."""
    if depth is None:
        first = 1 if prefix is None else layer_depth(prefix)
        deepest = max((str(op.attrs.get("module") or "").count(".") + 1 for op in placement.graph.ops), default=1)
        tried = [first, *range(first + 1, deepest + 1)]
        depth = next((d for d in tried if _whole_at(placement, stages, d, runtime)), tried[0])
    parts = whole_modules(placement, stages, depth, runtime)
    split_modules(placement, stages, depth, runtime)  # the same checks on each stage's first module
    return parts, depth


def _whole_at(placement: Placement, stages: list[Stage], depth: int, runtime: str) -> bool:
    try:
        whole_modules(placement, stages, depth, runtime)
        split_modules(placement, stages, depth, runtime)
    except SpecError:
        return False
    return True


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
    stem, blocks of several widths and a final convolution), each its own module, and it must be the
    model's only list of layers outside its own layers (an encoder-decoder's second list would be counted
    as the embedding or the head). A model without such a list is refused saying so, with every list
    found and why the closest one (the longest of alike layers, else ``prefix``) is none.
    """
    g = placement.graph
    paths = [p for p in (str(op.attrs.get("module") or "") for op in g.ops) if p]
    lists = outer_layer_lists(paths)
    others = other_layer_lists(paths, prefix)
    unlike = {p: _unlike(placement, p) for p in lists}
    if unlike[prefix] or others:
        alike = [p for p in lists if not unlike[p]]
        closest = max(alike, key=lambda p: len(lists[p])) if alike else prefix
        beside = [q for q in [prefix, *others] if q != closest]
        why = (f"has layers that are not alike ({unlike[closest]})" if unlike[closest] else
               f"has the list {beside[0]!r} beside it (an encoder-decoder or stages of blocks)")
        found = ", ".join(f"{p!r} of {len(lists[p])}{' unlike' if unlike[p] else ''} layers"
                          for p in sorted(lists, key=lambda p: (-len(lists[p]), p)))
        raise SpecError(f"{runtime} assigns transformer layers: the model has no repeated layer list "
                        f"(found {found}; the closest, {closest!r}, {why}); export to deepspeed or torch-pipelining")
    objects = boundaries.shared_modules(placement.graph)
    for i in sorted(lists[prefix]):
        tied = [f for f in objects.get(layer_name(prefix, i), {}).get("fqns", []) if _layer_index(f, prefix) != i]
        if tied:
            raise SpecError(f"{runtime}: layer {layer_name(prefix, i)!r} is one module object with {tied[0]!r}; "
                            f"{runtime} builds every layer with its own weights (export to deepspeed with "
                            f"TiedLayerSpec, or torch-pipelining)")


def _unlike(placement: Placement, prefix: str) -> str | None:
    """How two layers of the list ``prefix`` differ (the ops they run, their types in order), ``None`` if alike."""
    kinds: dict[int, list[str]] = {}
    for op in placement.graph.ops:
        i = _layer_index(str(op.attrs.get("module") or ""), prefix)
        if i is not None:
            kinds.setdefault(i, []).append(str(op.attrs.get("type", "")))
    first = min(kinds)
    i = next((i for i in sorted(kinds) if kinds[i] != kinds[first]), None)
    if i is None:
        return None
    return (f"{layer_name(prefix, first)} runs {len(kinds[first])} ops, {layer_name(prefix, i)} {len(kinds[i])} ops "
            f"of other types or order")


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
    placement = forward_view(placement)
    stages = pipeline_stages(placement, runtime, virtual)
    g = placement.graph
    paths = [str(op.attrs.get("module") or "") for op in g.ops]
    prefix = layer_prefix([p for p in paths if p])
    if prefix is None:
        raise SpecError(f"{runtime}: graph {g.name!r} has no repeated layer list in its module paths (like "
                        f"transformer.h.N or model.layers.N); import it with module paths, or export to torch-pipelining")
    if transformer:
        check_transformer_layers(placement, prefix, runtime)
    between = outside_between(paths, prefix)
    if between is not None:
        raise SpecError(f"{runtime}: module {between!r} runs between layers of {prefix!r}; {runtime} holds the "
                        f"embedding before the layers and the head after them (export to deepspeed or "
                        f"torch-pipelining)")
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
