"""A placement as pipeline stages over module names, and the checks every runtime needs.

A *stage* is a maximal run of ops on one device in the device-major order
(:func:`~placement_dsl.report.device_major_order`), so a contiguous pipeline has one stage
per device. Ops are named by their module path (``op.attrs["module"]``, set by the ONNX and
``torch.export`` importers) cut to ``depth`` dotted parts.

A runtime runs a plan only if it is a pipeline: one contiguous stage per device
(:func:`pipeline_stages`), stages on accelerators, no replicated stage; a stage boundary falls
between modules (:func:`split_modules`) and a split point names a module called once
(:func:`reused_modules`: torchvision's one ``relu`` per block is called three times, and the
ONNX exporter names its later calls ``relu_1``, ``relu_2``, which are no modules).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import boundaries
from ..cluster import CPU
from ..errors import SpecError
from ..io.costs import module_prefix
from ..placement import Placement
from ..report import device_major_order


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its index, device and ops (indices in the device-major order)."""

    index: int
    device: int
    ops: tuple[int, ...]


def op_name(op: Any) -> str:
    """An op's name for people: its source name (``attrs["name"]``) where it has one, else its id."""
    return str(op.attrs["name"]) if op.attrs.get("name") else op.name


def module_of(op: Any, depth: int | None = None) -> str | None:
    """The op's module path cut to ``depth`` dotted parts (``None``: all of it), ``None`` without one."""
    return module_prefix(op.attrs.get("module"), depth)


def stages_of(placement: Placement) -> list[Stage]:
    """The maximal runs of the device-major order on one device, in order; each stage's ops in program order
    (:attr:`~placement_dsl.graph.Graph.program_order`: the importer's execution order), whose first op is the one
    its split point names: the device-major order follows the graph's topological order, which may take a branch
    the program calls later first."""
    runs: list[tuple[int, list[int]]] = []
    for v in device_major_order(placement).tolist():
        d = int(placement.assign[v])
        if runs and runs[-1][0] == d:
            runs[-1][1].append(v)
        else:
            runs.append((d, [v]))
    position = np.empty(placement.graph.n, dtype=np.int64)
    position[placement.graph.program_order] = np.arange(placement.graph.n)
    return [Stage(k, d, tuple(sorted(ops, key=position.__getitem__))) for k, (d, ops) in enumerate(runs)]


def pipeline_stages(placement: Placement, runtime: str, virtual: bool = False) -> list[Stage]:
    """The stages of ``placement`` if ``runtime`` can run them, else a :class:`SpecError` saying why.

    Refused: a device holding several stages (the plan is not contiguous in execution order) unless
    ``virtual`` (a runtime with interleaved schedules) and the stages sit round-robin, stage ``k`` on
    the ``(k mod p)``-th device in order of first use (:func:`stage_ranks`); a stage on a CPU or host
    device; a replicated stage.
    """
    stages = stages_of(placement)
    names = placement.cluster.names
    held: dict[int, list[int]] = {}
    for s in stages:
        held.setdefault(s.device, []).append(s.index)
    for d, ks in held.items():
        if len(ks) > 1 and not (virtual and _round_robin(stages)):
            hint = (" or hold v stages round-robin (stage k on the (k mod p)-th device) for an interleaved schedule"
                    if virtual else "")
            raise SpecError(f"{runtime}: device {names[d]!r} holds stages {ks} that are not contiguous in execution "
                            f"order; a pipeline runtime runs one contiguous stage per rank{hint} "
                            f"({_remedy(placement)})")
    for s in stages:
        dev = placement.cluster.devices[s.device]
        if dev.kind == CPU or dev.host:
            op = placement.graph.ops[s.ops[0]]
            raise SpecError(f"{runtime}: stage {s.index} runs on {dev.kind} device {dev.name!r} ({len(s.ops)} ops "
                            f"from {op_name(op)!r}); pipeline runtimes place stages on accelerators only "
                            f"(solve with --cpus 0)")
    for s in stages:
        if len(placement.replica_sets[s.device]) > 1:
            raise SpecError(f"{runtime}: stage {s.index} on {names[s.device]!r} is replicated on "
                            f"{len(placement.replica_sets[s.device])} devices; {runtime} has no per-stage replication")
    return stages


def _remedy(placement: Placement) -> str:
    """What makes a split of one contiguous stage per device, naming the method that made this one (its source)."""
    made = placement.source.split("+")[0] if placement.source else ""
    if made == "dp":  # pointing at the method that made it would send the user round in a circle
        return "made by dp; solve with --method slicegraph, whose stages are intervals of one topological order"
    return (f"made by {made}; " if made else "") + "solve with --method dp"


def stage_ranks(stages: list[Stage]) -> list[int]:
    """The rank of each stage: devices numbered in the order their first stages run."""
    rank: dict[int, int] = {}
    for s in stages:
        rank.setdefault(s.device, len(rank))
    return [rank[s.device] for s in stages]


def _round_robin(stages: list[Stage]) -> bool:
    ranks = stage_ranks(stages)
    p = max(ranks, default=0) + 1
    return len(stages) % p == 0 and all(r == k % p for k, r in enumerate(ranks))


def reused_modules(placement: Placement) -> set[str]:
    """Module paths that are no single module call (:func:`~placement_dsl.boundaries.reused_modules`, the one
    definition :class:`~placement_dsl.boundaries.Boundaries` cuts by): torchvision's one ``relu`` per block is
    called three times, a block applied in a loop is called once per turn."""
    return boundaries.reused_modules(placement.graph)


def _owner(stages: list[Stage]) -> dict[int, int]:
    return {v: s.index for s in stages for v in s.ops}


def _containers(placement: Placement) -> set[str]:
    """Module paths that have submodules (every proper dotted prefix of a module path)."""
    out: set[str] = set()
    for op in placement.graph.ops:
        p = op.attrs.get("module")
        if p:
            out |= {str(module_prefix(p, k)) for k in range(1, p.count(".") + 1)}
    return out


def _need_modules(placement: Placement, runtime: str) -> None:
    g = placement.graph
    if not any(op.attrs.get("module") for op in g.ops):
        raise SpecError(f"{runtime}: graph {g.name!r} has no module paths (op.attrs['module']); import the model "
                        f"with 'placement-dsl import' (ONNX or torch.export) to name its split points")


def whole_modules(placement: Placement, stages: list[Stage], depth: int | None, runtime: str) -> list[list[str]]:
    """Each stage's modules at ``depth`` in execution order; a module cut between stages is refused."""
    _need_modules(placement, runtime)
    g = placement.graph
    containers = _containers(placement)
    seen: dict[str, int] = {}
    out: list[list[str]] = []
    for s in stages:
        mods: list[str] = []
        for v in s.ops:
            m = module_of(g.ops[v], depth)
            if m is None or (depth is not None and m.count(".") + 1 < depth and m in containers):
                continue  # no module, or a container's own glue op (a reshape between its children)
            if m in seen and seen[m] != s.index:
                raise SpecError(f"{runtime}: stage {s.index} begins inside module {m!r} (depth {depth}), whose ops "
                                f"also run on stage {seen[m]}; a runtime cuts only between modules (choose "
                                f"another --depth or a split between modules)")
            if m not in seen:
                seen[m] = s.index
                mods.append(m)
        out.append(mods)
    return out


def split_modules(placement: Placement, stages: list[Stage], depth: int | None, runtime: str) -> list[str]:
    """The module at each split point (:func:`split_places` without where in the module the split falls)."""
    return [point for point, _ in split_places(placement, stages, depth, runtime)]


def split_places(placement: Placement, stages: list[Stage], depth: int | None, runtime: str) -> list[tuple[str, str]]:
    """Where each stage after the first begins: ``(module, "beginning")`` or ``(module, "end")``, checked.

    A stage beginning at a module's op splits at the ``"beginning"`` of the shallowest module of that
    op's path that no earlier stage enters and the model calls (with ``depth`` the modules at ``depth``
    must lie wholly in their stages; a container beginning at the same op, ``transformer.h.1`` rather
    than its ``ln_1``, is the same point of the program and cuts no residual connection inside it; a
    ``ModuleList`` the model only iterates is never the point). A stage beginning with ops of no
    module (the root's own functional calls, like torchvision's ``F.relu``/``F.adaptive_avg_pool2d``
    and ``torch.flatten`` between ``features`` and ``classifier``) splits at the ``"end"`` of the
    module the previous stage ends with: the shallowest module of its last op's path that no later
    stage enters and the model calls. A stage that begins inside a
    module, after an op of no module, or at a module called several times
    (:func:`reused_modules`) is refused, naming the module and the stage.
    """
    _need_modules(placement, runtime)
    g = placement.graph
    if depth is not None:
        whole_modules(placement, stages, depth, runtime)
    reused = reused_modules(placement)
    owner = _owner(stages)
    _check_program_order(placement, stages, owner, runtime)
    called = called_modules(placement)
    scopes = [_scopes(g, s) for s in stages]
    before: set[str] = set()  # every module scope entered by an earlier stage
    points: list[tuple[str, str]] = []
    for s in stages:
        first = g.ops[s.ops[0]]
        path = first.attrs.get("module")
        if s.index and not path:
            points.append(_end_point(placement, stages, s.index, depth, scopes, reused, called, runtime))
        elif s.index:
            point = _split_point(path, depth, before, called)
            if point is None or point in before:
                raise SpecError(f"{runtime}: stage {s.index} begins inside module {path!r} at op {op_name(first)!r}, "
                                f"which stage {owner[_entered(g, stages, s.index, path)]} enters too; a runtime cuts "
                                f"only between modules")
            _check_called(point, called, f"stage {s.index} begins at", runtime)
            _check_no_skip(placement, stages, s.index, point, runtime)
            if point in reused:
                raise SpecError(f"{runtime}: stage {s.index} begins at {point!r}, a module called more than once "
                                f"(or an exporter's name for a repeated call of one); no runtime can split there")
            points.append((point, "beginning"))
        before |= scopes[s.index]
        if len(points) > 1 and points[-1][0] in {p for p, _ in points[:-1]}:
            raise SpecError(f"{runtime}: stage {s.index - 1} is module {points[-1][0]!r} alone, which would be split "
                            f"at both its beginning and its end; torch's split_spec holds one split point per module "
                            f"(join the stage to a neighbour)")
    return points


def _scopes(g: Any, stage: Stage) -> set[str]:
    """Every module scope (each dotted prefix of an op's path) the ops of ``stage`` run in."""
    out: set[str] = set()
    for v in stage.ops:
        p = g.ops[v].attrs.get("module")
        if p:
            out |= {str(module_prefix(p, k)) for k in range(1, p.count(".") + 2)}
    return out


def called_modules(placement: Placement) -> set[str] | None:
    """The modules the model calls (:func:`~placement_dsl.boundaries.called_modules`), ``None`` without module
    stacks; a container that is only iterated (a ``ModuleList`` of blocks) is never called."""
    return boundaries.called_modules(placement.graph)


def _check_called(point: str, called: set[str] | None, where: str, runtime: str) -> None:
    if called is not None and point not in called:
        raise SpecError(f"{runtime}: {where} {point!r}, a module the model never calls (a container it iterates, "
                        f"like a ModuleList); torch splits only at a module's call (choose a deeper --depth)")


def _check_program_order(placement: Placement, stages: list[Stage], owner: dict[int, int], runtime: str) -> None:
    """Refuse stages out of the model's execution order (the graph's program order, the exporter's): the runtime cuts
    the program at its split points, so every module op after a split runs on a later stage."""
    g = placement.graph
    latest = None
    for v in g.program_order.tolist():
        op = g.ops[v]
        if not op.attrs.get("module"):
            continue
        if latest is not None and owner[v] < owner[latest]:
            raise SpecError(f"{runtime}: op {op_name(op)!r} ({op.attrs['module']}) runs on stage {owner[v]} but after "
                            f"op {op_name(g.ops[latest])!r} ({g.ops[latest].attrs['module']}) of stage "
                            f"{owner[latest]} in the model's execution order; a runtime cuts the program in that "
                            f"order (solve with --method slicegraph or dp on the model's op order)")
        if latest is None or owner[v] >= owner[latest]:
            latest = v


def _end_point(placement: Placement, stages: list[Stage], k: int, depth: int | None, scopes: list[set[str]],
               reused: set[str], called: set[str] | None, runtime: str) -> tuple[str, str]:
    """The split after the module stage ``k - 1`` ends with, for a stage ``k`` beginning with an op of no module."""
    g = placement.graph
    first, last = g.ops[stages[k].ops[0]], g.ops[stages[k - 1].ops[-1]]
    path = last.attrs.get("module")
    if not path:
        raise SpecError(f"{runtime}: stage {k} begins with op {op_name(first)!r}, which belongs to no module, after "
                        f"op {op_name(last)!r} of no module either; a split point is the beginning or the end of a "
                        f"module")
    after = set().union(*scopes[k:])
    point = next((p for j in range(1, path.count(".") + 2) if (p := str(module_prefix(path, j))) not in after
                  and (called is None or p in called)), None)
    if point is None or point in after:
        raise SpecError(f"{runtime}: stage {k} begins with op {op_name(first)!r} of no module, after op "
                        f"{op_name(last)!r} inside module {path!r}, whose ops run on a later stage too; a runtime "
                        f"cuts only between modules")
    _check_called(point, called, f"stage {k} begins after", runtime)
    if point in reused:
        raise SpecError(f"{runtime}: stage {k} begins after {point!r}, a module called more than once (or an "
                        f"exporter's name for a repeated call of one); no runtime can split there")
    _check_no_skip(placement, stages, k, point, runtime)
    return point, "end"


def _check_no_skip(placement: Placement, stages: list[Stage], k: int, point: str, runtime: str) -> None:
    """Refuse a split at ``point`` (stage ``k``) inside a module whose own op after it reads an earlier stage.

    The modules around ``point`` are cut by the split; a cut container is fine, but a cut module
    whose own op on the later side reads a tensor of an earlier stage (a residual block's add
    reading the block's input) would need that tensor carried past the split point inside the
    module's forward, which no runtime does.
    """
    g = placement.graph
    ancestors = {str(module_prefix(point, j)) for j in range(1, point.count(".") + 1)}
    if not ancestors:
        return
    earlier = {v for s in stages[:k] for v in s.ops}
    for s in stages[k:]:
        for v in s.ops:
            path = g.ops[v].attrs.get("module")
            if path not in ancestors:
                continue
            for u in g.predecessors(v).tolist():
                if u in earlier:
                    raise SpecError(f"{runtime}: stage {k} begins at {point!r} inside module {path!r}, whose op "
                                    f"{op_name(g.ops[v])!r} on stage {s.index} reads {op_name(g.ops[u])!r} of "
                                    f"an earlier stage (a residual connection); no runtime can cut there")


def _split_point(path: str, depth: int | None, before: set[str], called: set[str] | None) -> str | None:
    """The shallowest module of ``path`` that no earlier stage enters and the model calls: the module whose
    beginning the stage's first op is (with ``depth`` the modules at ``depth`` are whole, :func:`whole_modules`,
    and a container beginning at the same op is the same point of the program, one that cuts no residual
    connection inside it)."""
    return boundaries.beginning_point(path, before, called)


def _entered(g: Any, stages: list[Stage], k: int, path: str) -> int:
    """An op of an earlier stage than ``k`` inside ``path`` (for the message)."""
    for s in stages[:k]:
        for v in s.ops:
            p = g.ops[v].attrs.get("module") or ""
            if p == path or p.startswith(path + ".") or path.startswith(p + "."):
                return v
    return stages[k - 1].ops[-1]
