"""Graph coarsening by operator fusion (MOIRAI, Zhang et al. §III-B, Alg. 1 and Table I).

A fusion rule is an ordered list of operator types (Table I: ``conv, bn``; ``conv, bn, relu``;
``conv, bn, add, relu``). A chain ``v1 -> v2 -> ... -> vk`` whose types spell a rule is fused
into one op when every link is a *direct* or *multi-input* connection: ``vi``'s only
consumer is ``v(i+1)`` (which may have other inputs, e.g. the residual input of ``add``);
a *multi-output* link (``vi`` feeding other ops too) is never fused (§III-B, Fig. 6). Alg. 1's
``bind``/``unbind`` keep a partial match only when it completes a rule; here a chain takes the
longest rule it completes, rules in priority order, ops in topological order.

The fused op does the members' work one after another: its time on a device kind is the sum,
its memory the sum, and its output is the last member's (the only tensor leaving the chain).
:meth:`Coarsening.expand` maps a placement of the coarse graph — and its schedule — back to
every original op: members run back to back from the fused op's start, and the fused op's
transfers are its last member's, so the expanded schedule is valid with the same makespan.

Types are read from ``op.attrs["type"]`` (ONNX / torch export / zoo), else from the last part
of the op's name, and normalized (:data:`SYNONYMS`: ``Conv``, ``convolution`` -> ``conv``, ...).

Beyond the rules, :func:`contract` fuses any partition of the ops into *intervals of one topological
order* (each interval is convex: a path between two of its ops stays inside it, and the coarse graph
is acyclic), and :func:`runs` cuts an order into such intervals where a placement keeps consecutive ops
on one device: the chain contraction and the contraction of ops an incumbent ties together, which a
solve uses to make a model small enough for its budget. A coarse placement of such a graph is a
placement of the original graph (every member on its group's device); a coarse optimum is no bound for
the original graph.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import SpecError
from .graph import DEFAULT_KIND, Graph, Op
from .placement import Placement
from .schedule import Schedule

SYNONYMS: dict[str, tuple[str, ...]] = {
    "conv": ("conv", "conv1d", "conv2d", "conv3d", "convolution", "convtranspose", "depthwiseconv2dnative"),
    "bn": ("bn", "batchnorm", "batchnormalization", "batch_norm", "fusedbatchnorm", "fusedbatchnormv3",
           "_native_batch_norm_legit_no_training", "batchnorm2d"),
    "act": ("act", "relu", "relu6", "gelu", "sigmoid", "tanh", "silu", "swish", "leakyrelu", "hardswish", "elu",
            "clip", "softplus", "hardtanh", "mish"),
    "matmul": ("matmul", "gemm", "linear", "mm", "addmm", "bmm", "dense", "fc"),
    "add": ("add", "addv2", "biasadd", "sum"),
    "mul": ("mul", "multiply"),
    "sub": ("sub", "subtract"),
    "div": ("div", "realdiv", "divide"),
    "math": ("pow", "sqrt", "rsqrt", "exp", "log", "neg", "abs", "reciprocal", "erf", "square", "where"),
}
CANONICAL = {alias: name for name, aliases in SYNONYMS.items() for alias in aliases}
ELEMENTWISE = frozenset({"add", "mul", "sub", "div", "act", "bn", "math"})  # one value in, one value out, per element


@dataclass(frozen=True)
class FusionRule:
    """An ordered list of operator types; ``"eltwise"`` matches any elementwise type and a last token
    ending in ``+`` may repeat (an elementwise chain)."""

    name: str
    pattern: tuple[str, ...]

    def matches(self, types: Sequence[str | None]) -> int:
        """The length of the longest prefix of ``types`` this rule fuses completely (0 if none)."""
        *fixed, last = self.pattern
        repeat = last.endswith("+")
        tokens = [*fixed, last.rstrip("+")]
        if len(types) < len(tokens) or not all(_is(t, tok) for t, tok in zip(types, tokens)):
            return 0
        n = len(tokens)
        while repeat and n < len(types) and _is(types[n], tokens[-1]):
            n += 1
        return n


def _is(kind: str | None, token: str) -> bool:
    return kind is not None and (kind == token or (token == "eltwise" and kind in ELEMENTWISE))


TABLE_I = (FusionRule("conv-bn-add-relu", ("conv", "bn", "add", "act")),
           FusionRule("conv-bn-relu", ("conv", "bn", "act")), FusionRule("conv-bn", ("conv", "bn")))
DEFAULT_RULES = (*TABLE_I, FusionRule("conv-act", ("conv", "act")), FusionRule("matmul-add-act", ("matmul", "add", "act")),
                 FusionRule("matmul-add", ("matmul", "add")), FusionRule("matmul-act", ("matmul", "act")),
                 FusionRule("elementwise", ("eltwise", "eltwise+")))
"""Table I, then convolution + activation, matmul + bias and/or activation, and chains of elementwise ops."""


def op_type(op: Op) -> str | None:
    """The op's canonical type: ``attrs["type"]``, else its name's last part without digits (``None`` if unknown)."""
    raw = op.attrs.get("type")
    if raw is None:
        raw = re.split(r"[./:/]", op.name)[-1]
    key = re.sub(r"[\d_]+$", "", str(raw).strip().lower()) or str(raw).lower()
    return CANONICAL.get(str(raw).strip().lower(), CANONICAL.get(key))


# ---------------------------------------------------------------------------- the coarse graph
@dataclass(frozen=True)
class Coarsening:
    """A coarse graph and its map back: ``members[c]`` are the original ops of coarse op ``c`` in run order."""

    graph: Graph
    coarse: Graph
    members: tuple[tuple[int, ...], ...]
    rules: tuple[str | None, ...]

    @property
    def of(self) -> np.ndarray:
        """The coarse op of every original op."""
        out = np.empty(self.graph.n, dtype=np.int64)
        for c, group in enumerate(self.members):
            out[list(group)] = c
        return out

    def report(self) -> dict[str, object]:
        """Ops and edges before and after, the reduction, and the fused chains per rule."""
        fused: dict[str, int] = {}
        for rule in self.rules:
            if rule is not None:
                fused[rule] = fused.get(rule, 0) + 1
        return {"ops": self.graph.n, "coarse_ops": self.coarse.n, "edges": self.graph.m, "coarse_edges": self.coarse.m,
                "reduction": 1 - self.coarse.n / max(self.graph.n, 1), "fused": fused}

    def expand(self, placement: Placement) -> Placement:
        """The coarse placement (and its schedule) on every original op (see the module docstring). A schedule is
        expanded only when every group is a chain whose last member alone feeds ops outside it (the fusion rules'
        groups); otherwise the expanded placement carries none (the cost model schedules it)."""
        if placement.graph.names != self.coarse.names:
            raise SpecError(f"Coarsening.expand: the placement is for graph {placement.graph.name!r}, not the coarse "
                            f"graph {self.coarse.name!r}")
        assign = placement.assign[self.of]
        chains = placement.schedule is not None and self._chains()
        schedule = self._schedule(placement, assign) if chains else None
        return Placement(self.graph, placement.cluster, assign, placement.source, schedule=schedule)

    def _chains(self) -> bool:
        """Whether only the last member of every group has consumers outside its group."""
        of = self.of
        g = self.graph
        last = np.zeros(g.n, dtype=bool)
        last[[group[-1] for group in self.members]] = True
        leaves = of[g.src] != of[g.dst]
        return bool(last[g.src[leaves]].all())

    def _schedule(self, placement: Placement, assign: np.ndarray) -> Schedule:
        times = placement.cluster.times(self.graph)
        start = np.zeros(self.graph.n)
        for c, group in enumerate(self.members):
            t = float(placement.schedule.start[c])
            for v in group:
                start[v], t = t, t + float(times[v, assign[v]])
        moves = {(self.members[c][-1], d): t for (c, d), t in placement.schedule.transfer_start.items()}
        return Schedule(start, moves)


def fusion_chains(graph: Graph, rules: Sequence[FusionRule] = DEFAULT_RULES,
                  type_of: Callable[[Op], str | None] = op_type) -> list[tuple[list[int], str]]:
    """Chains to fuse with the rule each completes: rules in priority order, chain heads in topological order."""
    types = [type_of(op) for op in graph.ops]
    only = [int(graph.successors(v)[0]) if graph.successors(v).size == 1 else -1 for v in range(graph.n)]
    taken = np.zeros(graph.n, dtype=bool)
    out = []
    for rule in rules:
        for v in graph.topo.tolist():
            if taken[v]:
                continue
            chain = [v]
            while only[chain[-1]] >= 0 and not taken[only[chain[-1]]] and len(chain) < graph.n:
                chain.append(only[chain[-1]])
            n = rule.matches([types[u] for u in chain])
            if n >= 2:
                taken[chain[:n]] = True
                out.append((chain[:n], rule.name))
    return out


def _merged(graph: Graph, group: Sequence[int]) -> Op | None:
    """One op doing the members' work back to back (its output is the last member's, its colocation group the
    first member's that has one); ``None`` when no device kind runs every member."""
    ops = [graph.ops[v] for v in group]
    kinds = {k for op in ops for k in op.work}
    concrete = kinds - {DEFAULT_KIND}
    work = {k: sum(op.time_on(k) for op in ops) for k in (concrete or kinds)}
    if DEFAULT_KIND in kinds and concrete and all(DEFAULT_KIND in op.work for op in ops):
        work[DEFAULT_KIND] = sum(op.work[DEFAULT_KIND] for op in ops)
    last, work = ops[-1], {k: t for k, t in work.items() if math.isfinite(t)}
    if not work:
        return None
    return Op(name="+".join(op.name for op in ops), work=work, param_bytes=sum(op.param_bytes for op in ops),
              out_bytes=last.out_bytes,
              activation_bytes=sum(op.activation_bytes for op in ops), backward=last.backward,
              group=next((op.group for op in ops if op.group is not None), None),
              attrs={**last.attrs, "fused": [op.name for op in ops], "type": "+".join(str(op_type(o)) for o in ops)})


def coarsen(graph: Graph, rules: Sequence[FusionRule] = DEFAULT_RULES,
            type_of: Callable[[Op], str | None] = op_type) -> Coarsening:
    """Fuse the chains :func:`fusion_chains` finds (MOIRAI Alg. 1); every other op stays as it is."""
    fused = [(chain, rule, _merged(graph, chain)) for chain, rule in fusion_chains(graph, rules, type_of)]
    head = {chain[0]: (chain, rule, op) for chain, rule, op in fused if op is not None}
    inner = {v for chain, _, _ in head.values() for v in chain}
    members, ops = [], []
    for v in graph.topo.tolist():
        if v in head:
            chain, rule, op = head[v]
            members.append((tuple(chain), rule))
            ops.append(op)
        elif v not in inner:
            members.append(((v,), None))
            ops.append(graph.ops[v])
    label = np.empty(graph.n, dtype=np.int64)
    for c, (group, _) in enumerate(members):
        label[list(group)] = c
    names = [op.name for op in ops]
    edges = sorted({(names[label[u]], names[label[v]]) for u, v in zip(graph.src.tolist(), graph.dst.tolist())
                    if label[u] != label[v]})
    coarse = Graph(ops, edges, name=f"{graph.name}:fused")
    return Coarsening(graph, coarse, tuple(g for g, _ in members), tuple(r for _, r in members))


# ---------------------------------------------------------------------------- contraction of intervals
def contract(graph: Graph, groups: Sequence[Sequence[int]], name: str = "",
             senders: np.ndarray | None = None) -> Coarsening:
    """The coarse graph of ``groups``, a partition of the ops into intervals of one topological order (members in
    that order; groups in it too). A group of one op keeps it; a larger one becomes one op doing the members'
    work back to back (:func:`_merged`) whose output is the sum of the members' outputs that leave it (every
    consumer outside gets it), or of those among ``senders`` (a mask of ops) only: a caller that knows which
    outputs cost a transfer (the others reach consumers on the same device) counts those alone. Raises
    :class:`SpecError` when a group has no device kind that runs every member or the groups do not partition the
    ops."""
    of = np.full(graph.n, -1, dtype=np.int64)
    for c, group in enumerate(groups):
        of[list(group)] = c
    if (of < 0).any() or sum(len(group) for group in groups) != graph.n:
        raise SpecError(f"contract: the groups do not partition the {graph.n} ops of graph {graph.name!r}")
    leaves = of[graph.src] != of[graph.dst]
    sends = np.zeros(graph.n, dtype=bool)
    sends[graph.src[leaves]] = True
    if senders is not None:
        sends &= senders
    ops = []
    for c, group in enumerate(groups):
        if len(group) == 1:
            ops.append(graph.ops[group[0]])
            continue
        op = _merged(graph, group)
        if op is None:
            raise SpecError(f"contract: no device kind runs every op of group {c} ({graph.names[group[0]]!r}, ...)")
        out = float(sum(graph.out_bytes[v] for v in group if sends[v]))
        ops.append(op.model_copy(update={"name": f"{graph.names[group[0]]}..{len(group)}", "out_bytes": out}))
    names = [op.name for op in ops]
    edges = sorted({(names[of[u]], names[of[v]]) for u, v in zip(graph.src[leaves].tolist(), graph.dst[leaves].tolist())})
    coarse = Graph(ops, edges, name=name or f"{graph.name}:contracted")
    return Coarsening(graph, coarse, tuple(tuple(int(v) for v in group) for group in groups), (None,) * len(groups))


def runs(graph: Graph, order: Sequence[int], device: np.ndarray, single: np.ndarray, cap: int,
         begins: np.ndarray | None = None, ends: np.ndarray | None = None) -> list[list[int]]:
    """``order`` (a topological order) cut into intervals: a new one starts at an op that is ``single`` (it stays
    alone), after one, when the device changes, when the interval holds ``cap`` ops, where the colocation groups
    of its members would be two (a group of one op is none), at an op of ``begins`` and after one of ``ends``
    (masks of ops; default none)."""
    begins = np.zeros(graph.n, dtype=bool) if begins is None else begins
    ends = np.zeros(graph.n, dtype=bool) if ends is None else ends
    counts = Counter(op.group for op in graph.ops)
    out: list[list[int]] = []
    current: list[int] = []
    group: str | None = None
    for v in order:
        op_group = graph.ops[v].group if counts[graph.ops[v].group] > 1 else None
        if current and (single[v] or single[current[-1]] or device[v] != device[current[-1]] or len(current) >= cap
                        or begins[v] or ends[current[-1]]
                        or (op_group is not None and group is not None and op_group != group)):
            out.append(current)
            current, group = [], None
        current.append(int(v))
        group = group if op_group is None else op_group
    if current:
        out.append(current)
    return out
