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

A training placement exports as its forward stages (:func:`forward_view`): each backward op belongs
to the stage of its forward op, the forward op of its colocation group (the training graph pairs
``v.grad`` with ``v`` so), and the runtime derives the backward pass from the forward stages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import boundaries
from ..cluster import CPU
from ..errors import SpecError
from ..graph import Graph
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


def forward_view(placement: Placement) -> Placement:
    """The placement of a training graph's forward ops alone (the placement itself for a forward graph).

    Each backward op belongs to its forward op's stage: the forward ops of its colocation group
    (:attr:`~placement_dsl.graph.Graph.groups`; :func:`~placement_dsl.zoo.training.with_backward` pairs
    ``v.grad`` with ``v``). A backward op on another device than its forward op, or with no forward op
    in its group, is refused: a pipeline runtime runs a stage's backward on the rank of its forward.
    """
    g = placement.graph
    if not g.is_training:
        return placement
    names = placement.cluster.names
    forward_of = np.full(g.n, -1, dtype=np.int64)
    for grp in g.groups:
        ahead = grp[~g.backward[grp]]
        if ahead.size:
            forward_of[grp] = ahead[0]
    for v in np.flatnonzero(g.backward).tolist():
        u = int(forward_of[v])
        if u < 0:
            raise SpecError(f"export: backward op {g.names[v]!r} shares a colocation group with no forward op; a "
                            f"runtime runs a gradient on its forward op's stage (pair them by Graph groups)")
        if placement.assign[v] != placement.assign[u]:
            raise SpecError(f"export: backward op {g.names[v]!r} runs on {names[placement.assign[v]]!r} but its "
                            f"forward op {g.names[u]!r} on {names[placement.assign[u]]!r}; a pipeline runtime runs "
                            f"a stage's backward on the rank of its forward")
    keep = np.flatnonzero(~g.backward)
    kept = set(keep.tolist())
    edges = [(g.names[u], g.names[v]) for u, v in zip(g.src.tolist(), g.dst.tolist()) if u in kept and v in kept]
    forward = Graph([g.ops[v] for v in keep.tolist()], edges, name=g.name)
    replicas = {names[d]: [names[x] for x in members] for d, members in enumerate(placement.replica_sets)
                if len(members) > 1}
    return Placement(forward, placement.cluster, placement.assign[keep], placement.source, replicas=replicas or None)


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
                            f"({_remedy(placement, stages)})")
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


def _remedy(placement: Placement, stages: list[Stage]) -> str:
    """What makes a split of one contiguous stage per device, naming the method that made this one (its source); a
    split of ``v`` stages per rank round-robin (an interleaved plan, ``--virtual-stages``) goes to the runtimes that run
    it instead."""
    if _round_robin(stages):
        v = len(stages) // (max(stage_ranks(stages)) + 1)
        return (f"the plan holds {v} virtual stages per rank round-robin: export it to megatron, torch-pipelining, "
                "torchtitan or schedule-csv with --schedule interleaved-1f1b, or solve without --virtual-stages")
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


def tied_modules(placement: Placement, stages: list[Stage]) -> list[dict[str, Any]]:
    """The module objects called under several names on several stages (a tied encoder and decoder split apart):
    each as ``{"fqns": [its names], "stages": [the stages calling it]}``. A runtime builds each stage's part of the
    model on its own, so those stages hold one copy each of the module's weights, and a training step must sum
    their gradients (as Megatron-LM does for a tied embedding and output layer)."""
    objects = boundaries.shared_modules(placement.graph)
    found: dict[tuple[str, ...], set[int]] = {}
    for s in stages:
        for v in s.ops:
            for path in placement.graph.ops[v].attrs.get("nn_module_stack") or []:
                obj = objects.get(path)
                if obj and len(obj["fqns"]) > 1:
                    found.setdefault(tuple(obj["fqns"]), set()).add(s.index)
    spread = [fqns for fqns, ks in found.items() if len(ks) > 1]
    outer = [fqns for fqns in spread if not any(other != fqns and all(any(f.startswith(o + ".") for o in other)
                                                                      for f in fqns) for other in spread)]
    return [{"fqns": list(fqns), "stages": sorted(found[fqns])} for fqns in outer]


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


def need_modules(placement: Placement, runtime: str) -> None:
    """Refuse a graph whose ops carry no module paths: no module-based runtime can name its split points."""
    g = placement.graph
    if not any(op.attrs.get("module") for op in g.ops):
        raise SpecError(f"{runtime}: graph {g.name!r} has no module paths (op.attrs['module']); import the model "
                        f"with 'placement-dsl import' (ONNX or torch.export) to name its split points")


def whole_modules(placement: Placement, stages: list[Stage], depth: int | None, runtime: str) -> list[list[str]]:
    """Each stage's modules at ``depth`` in execution order; a module cut between stages is refused."""
    need_modules(placement, runtime)
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
    stage enters and the model calls.

    torch cuts at every call of a split point's module object, so a point at a module called several
    times, or one object under several names (:func:`reused_modules`: a tied ``enc`` and ``dec``),
    would cut more stages than the plan has; then another name of the same point of the program is
    taken: a deeper module beginning at the stage's first op, or the end of a module the previous stage
    ends with, one the model calls once (and one split point per module). A stage that begins inside a
    module, after an op of no module, or where every such name is called several times is refused,
    naming the module (and its other names) and the stage.
    """
    need_modules(placement, runtime)
    g = placement.graph
    if depth is not None:
        whole_modules(placement, stages, depth, runtime)
    owner = _owner(stages)
    check_program_order(placement, stages, owner, runtime)
    ctx = _Points(placement, stages, runtime, reused_modules(placement), boundaries.called_modules(placement.graph))
    before: set[str] = set()  # every module scope entered by an earlier stage
    for s in stages:
        first = g.ops[s.ops[0]]
        path = first.attrs.get("module")
        if s.index and not path:
            ctx.add(s.index, [], _end_point(placement, stages, s.index, ctx))
        elif s.index:
            starts = boundaries.beginning_points(path, before, ctx.called)
            last = str(g.ops[stages[s.index - 1].ops[-1]].attrs.get("module") or "")
            ends = _end_candidates(placement, stages, s.index, ctx) if last else []
            if not starts and not (ends and path in ctx.reused and not _within(last, path)):
                raise SpecError(f"{runtime}: stage {s.index} begins inside module {path!r} at op {op_name(first)!r}, "
                                f"which stage {owner[_entered(g, stages, s.index, path)]} enters too; a runtime cuts "
                                f"only between modules")
            ctx.add(s.index, starts, ends)  # a later call of a module an earlier stage ran: the end before it
        before |= ctx.scopes[s.index]
    return ctx.chosen()


def _within(path: str, module: str) -> bool:
    """``path`` is ``module`` or one of its submodules."""
    return path == module or path.startswith(module + ".")


class _Points:
    """Each stage's split points that pass the checks, and one of them per stage, no module twice."""

    def __init__(self, placement: Placement, stages: list[Stage], runtime: str, reused: set[str],
                 called: set[str] | None):
        self.placement, self.stages, self.runtime = placement, stages, runtime
        self.reused, self.called = reused, called
        self.objects = boundaries.shared_modules(placement.graph)
        self.scopes = [_scopes(placement.graph, s) for s in stages]
        self.options: list[tuple[int, list[tuple[str, str]]]] = []

    def add(self, k: int, starts: list[str], ends: list[str]) -> None:
        """Stage ``k``'s points among ``starts`` (``"beginning"``) then ``ends`` (``"end"``) that pass the checks, in
        that order of preference; none passing is the first one's error."""
        error: SpecError | None = None
        good = []
        for point, where in [(p, "beginning") for p in starts] + [(p, "end") for p in ends]:
            try:
                self._check(k, point, where)
            except SpecError as err:
                error = error or err
                continue
            good.append((point, where))
        if not good:
            raise error or SpecError(f"{self.runtime}: stage {k} has no split point")
        self.options.append((k, good))

    def chosen(self) -> list[tuple[str, str]]:
        """The first choice in preference order of one point per stage, no module twice (torch's split_spec holds
        one point per module): a stage that is one module alone begins at a deeper module or ends at one."""
        picked: list[tuple[str, str]] = []
        stuck = [0]
        failed: set[tuple[int, str]] = set()  # a stage and the point before it that leave no choice after

        def fill(i: int) -> bool:
            if i == len(self.options):
                return True
            stuck[0] = max(stuck[0], i)
            key = (i, picked[-1][0] if picked else "")
            if key in failed:
                return False
            for point, where in self.options[i][1]:
                if point not in {p for p, _ in picked}:
                    picked.append((point, where))
                    if fill(i + 1):
                        return True
                    picked.pop()
            failed.add(key)
            return False

        if not fill(0):
            k, good = self.options[stuck[0]]
            raise SpecError(f"{self.runtime}: stage {k - 1} is module {good[0][0]!r} alone, which would be split at "
                            f"both its beginning and its end; torch's split_spec holds one split point per module "
                            f"(join the stage to a neighbour)")
        return picked

    def _check(self, k: int, point: str, where: str) -> None:
        at = "begins at" if where == "beginning" else "begins after"
        _check_called(point, self.called, f"stage {k} {at}", self.runtime)
        if point in self.reused:
            raise SpecError(f"{self.runtime}: stage {k} {at} {point!r}, {self._reuse(point)}; no runtime can split "
                            f"there, and no module the model calls once begins or ends there instead")
        _check_no_skip(self.placement, self.stages, k, point, self.runtime)

    def _reuse(self, point: str) -> str:
        obj = self.objects.get(point)
        if obj and len(obj["fqns"]) > 1:
            others = ", ".join(repr(f) for f in obj["fqns"] if f != point)
            return (f"one module object also named {others} and called {obj['calls']} times in all (torch's "
                    f"pipeline() cuts at each call)")
        return "a module called more than once (or an exporter's name for a repeated call of one)"


def _scopes(g: Any, stage: Stage) -> set[str]:
    """Every module scope (each dotted prefix of an op's path) the ops of ``stage`` run in."""
    out: set[str] = set()
    for v in stage.ops:
        p = g.ops[v].attrs.get("module")
        if p:
            out |= {str(module_prefix(p, k)) for k in range(1, p.count(".") + 2)}
    return out


def _check_called(point: str, called: set[str] | None, where: str, runtime: str) -> None:
    if called is not None and point not in called:
        raise SpecError(f"{runtime}: {where} {point!r}, a module the model never calls (a container it iterates, "
                        f"like a ModuleList); torch splits only at a module's call (choose a deeper --depth)")


def check_program_order(placement: Placement, stages: list[Stage], owner: dict[int, int], runtime: str) -> None:
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


def _end_candidates(placement: Placement, stages: list[Stage], k: int, ctx: _Points) -> list[str]:
    """The modules stage ``k - 1`` ends with that no later stage enters and the model calls, shallowest first."""
    path = placement.graph.ops[stages[k - 1].ops[-1]].attrs.get("module") or ""
    after = set().union(*ctx.scopes[k:])
    return [p for j in range(1, path.count(".") + 2) if (p := str(module_prefix(path, j))) not in after
            and (ctx.called is None or p in ctx.called)]


def _end_point(placement: Placement, stages: list[Stage], k: int, ctx: _Points) -> list[str]:
    """The split candidates after the module stage ``k - 1`` ends with, for a stage ``k`` beginning with an op of
    no module."""
    g = placement.graph
    runtime = ctx.runtime
    first, last = g.ops[stages[k].ops[0]], g.ops[stages[k - 1].ops[-1]]
    path = last.attrs.get("module")
    if not path:
        raise SpecError(f"{runtime}: stage {k} begins with op {op_name(first)!r}, which belongs to no module, after "
                        f"op {op_name(last)!r} of no module either; a split point is the beginning or the end of a "
                        f"module")
    points = _end_candidates(placement, stages, k, ctx)
    if not points:
        raise SpecError(f"{runtime}: stage {k} begins with op {op_name(first)!r} of no module, after op "
                        f"{op_name(last)!r} inside module {path!r}, whose ops run on a later stage too; a runtime "
                        f"cuts only between modules")
    return points


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


def _entered(g: Any, stages: list[Stage], k: int, path: str) -> int:
    """An op of an earlier stage than ``k`` inside ``path`` (for the message)."""
    for s in stages[:k]:
        for v in s.ops:
            p = g.ops[v].attrs.get("module") or ""
            if p == path or p.startswith(path + ".") or path.startswith(p + "."):
                return v
    return stages[k - 1].ops[-1]
