"""Single-sample placement (Tarnawski's latency, MOIRAI's makespan): ours against MOIRAI's baselines, with a bound.

    python benchmarks/bench_single_sample.py [--time-limit 300] [--quick] [--only NAME ...]
        [--sizes 500 1000 2000 5000] [--seeds 0 1 2] [--json out.json] [--data ../shared/data] [--sheets DIR]
    python benchmarks/bench_single_sample.py --linked [--time-limit 10] [--seeds 0 1 2] [--only NAME ...]

Inputs (each skipped cleanly when its data is absent):

* every latency input of Tarnawski et al. in ``dnn-partitioning/latency-inputs`` as the command line's
  ``--objective latency --method ip`` means it (latency, hard memory, contiguous splits); anchor: the
  paper's IP latency and gap (Table 4, ``paper_latency.csv``);
* every MOIRAI sample sheet in ``moirai/`` (makespan, hard memory, port congestion); anchor:
  example-1's optimum 30; and with ``--sheets FOLDER`` every ``.xls`` sheet there (``sheet:STEM``, e.g. the
  generated families below written in MOIRAI's format: a row per op, a flow per edge);
* generated families, ``--sizes`` ops and ``--seeds`` (seed 0: the zoo's times; seed ``s > 0``: every
  op time times a log-normal factor of sigma 0.1 drawn from ``s``, like profiling noise):

  - ``gpt`` (operator-level transformer decoder of :func:`placement_dsl.zoo.gpt3`, hidden 512, 8 heads,
    512 tokens, layers chosen for the size) and ``resnet`` (bottleneck CNN of
    :func:`placement_dsl.zoo.resnet`, batch 8, its third stage deepened for the size) on both clusters of
    MOIRAI's Table III (makespan; the CNN's accelerator times scaled by each GPU's fp32 peak); anchor:
    MOIRAI Fig. 10's best speedups of its MILP over m-SCT and GETF (1.77x / 1.33x inter-server,
    1.70x / 1.35x intra-server) next to ours over each;
  - ``transformer`` (operator granularity, :func:`placement_dsl.zoo.transformer`) and ``resnet`` on a
    Tarnawski-style cluster of 3 accelerators and a CPU (latency, hard memory, any split);
  - ``bert`` (operator-level transformer with per-head ops, :func:`_bert`) and ``cnn`` (the ``resnet`` above) as
    Tarnawski's own latency inputs are: four accelerators whose memory binds (the graph needs three of them) and a
    CPU 23x slower, contiguous splits (``4acc-mem+cpu``, :func:`tarnawski_problem`); anchor: latency-best, the
    column beside ours (no paper has these graphs);
  - ``gpt3-330M`` on both Table III clusters (not in ``--quick``); anchor: Table V's placement times;
  - ``inception`` (the zoo's Inception-v3, 120 ops, one size) as Tarnawski's layer inputs are: twelve accelerators
    whose memory binds (the graph fills 7.8 of them, as his InceptionV3 input does) and eight CPUs 10x slower
    (``12acc-mem+8cpu``, :func:`layers_problem`); anchor: latency-best;
  - ``bert6`` and ``bert12`` (:func:`bert_layers`): Tarnawski's BERT-3 operator input with its middle encoder
    layer repeated, in its own format (accelerators of 600 MB as full as BERT-3's, eight CPUs), ``--seeds`` noise;
    anchor: latency-best's value.

With ``--linked``, the linked family alone (:func:`linked_cases`): small graphs (the zoo's transformer, a ResNet, its
Inception-v3, a random DAG) on three accelerators of speeds 2, 1 and 0.5 in an order drawn by the seed, memories 1.2, 1
and 2 times 40 % of the graph's, linked in a line (the ends two hops apart) of drawn bandwidths and latencies, with and
without a CPU linked to the first; latency, hard memory (the class latency-best answers in). Columns: latency-best
(``--time-limit`` seconds) and the split it chose, the exact formulation's answer and bound among DAG-ordered splits
(``--method exact``) and ``solve``'s over every split, each in ``--time-limit`` seconds, and latency-best over the
best of them.

Columns: the best of the package's heuristics for the objective (``cpop`` and ``schedule-ls`` from it
for makespan, ``latency-best`` for latency), ``m-sct``, ``getf``, HEFT (``list``), the best single
device (``one-device-best``), ours (``solve(problem, time_limit=T)``: the formulation the problem
chooses, HiGHS), its bound and gap, the solve's wall seconds and its phases as
:class:`~placement_dsl.result.Seconds` reports them: ``start`` (the warm start: heuristics),
``build`` + ``handoff`` (model), ``solve`` (search), and, when the model was too large to build,
``coarse`` (the coarse solve) and ``lns`` (LNS over windows of contracted models), ``again`` (the improving method's
fresh-seed rounds after them), and for the makespan ``restarts`` (the restarts from other starts and kicks once
those searches stalled). A wall time above
the limit plus 5 s is marked ``OVER``. Each heuristic runs with
``time_limit = max(5, T / 10)``. A value marked ``*`` is not valid for the problem (e.g. a
non-contiguous split where the problem asks for contiguity), ``—`` means the method declined (reason
in the JSON). Every value is the cost model's (``problem.evaluate``). "model not built": the solve sized
the model, found it could not be built and searched in the time left, and answered its fallback (the
JSON keeps its message).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import numpy as np
from common import SHARED_DATA, fmt, markdown_head, markdown_row

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Congestion, Contiguous, DagOrder, Memory
from placement_dsl.errors import PlacementError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.io import load_workload, moirai
from placement_dsl.objectives import Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.result import relative_gap
from placement_dsl.solve import solve
from placement_dsl.starts import goal
from placement_dsl.zoo import (
    ACCELERATOR_ROOFLINE,
    RESNET_STAGES,
    TABLE_III,
    default_cluster,
    gpt3,
    inception,
    resnet,
    transformer,
)
from placement_dsl.zoo.gpus import GPU_ROOFLINES, moirai_cluster

BASELINES = ("m-sct", "getf", "list", "one-device-best")
FIG10 = {"inter-server": {"m-sct": 1.77, "getf": 1.33}, "intra-server": {"m-sct": 1.70, "getf": 1.35}}
"""MOIRAI Fig. 10 (a)/(b): its MILP's largest speedup over m-SCT and GETF on the original graphs."""
TABLE_V_330M = {"m-sct": 15.92, "getf": 75.0, "ours": 82.8}
"""MOIRAI Table V: placement seconds for GPT-3 330M (original graph; MOIRAI 1.38 min, GETF 1.25 min)."""
PAPER_OPTIMUM = {"example-1": 30.0}
TARNAWSKI_CLUSTER = "3acc+cpu"
TARNAWSKI_MEMORY = "4acc-mem+cpu"  # accelerators whose memory binds, as in Tarnawski's latency inputs
TARNAWSKI_LAYERS = "12acc-mem+8cpu"  # Tarnawski's layer inputs' cluster: twelve accelerators whose memory binds, 8 CPUs


@dataclass
class Case:
    """An input, built only when it is run (``--only`` selects by name first)."""

    name: str
    build: Callable[[], Problem]
    anchor: str = ""
    scenario: str = ""

    @cached_property
    def problem(self) -> Problem:
        return self.build()


# ---------------------------------------------------------------------------- inputs
def _noisy(graph: Graph, seed: int) -> Graph:
    """``graph`` with every op time times a log-normal factor (sigma 0.1) drawn from ``seed``; seed 0: unchanged."""
    if seed == 0:
        return graph
    rng = np.random.default_rng(seed)
    ops = [op.model_copy(update={"work": {k: float(t * f) for k, t, f in
                                          zip(op.work, op.work.values(), rng.lognormal(0.0, 0.1, len(op.work)))}})
           for op in graph.ops]
    return Graph(ops, [(graph.names[u], graph.names[v]) for u, v in zip(graph.src, graph.dst)],
                 name=f"{graph.name}-s{seed}")


def _on_gpus(graph: Graph, scenario: str) -> Graph:
    """A zoo graph (accelerator/CPU kinds) on Table III's GPU kinds: accelerator time scaled by fp32 peaks."""
    kinds = sorted({kind for _, kind, _ in TABLE_III[scenario][0]})  # in order: _noisy draws a factor per kind
    ops = [op.model_copy(update={"work": {k: op.work["accelerator"] * ACCELERATOR_ROOFLINE.peak_flops
                                          / GPU_ROOFLINES[k].peak_flops for k in kinds}}) for op in graph.ops]
    return Graph(ops, [(graph.names[u], graph.names[v]) for u, v in zip(graph.src, graph.dst)], name=graph.name)


@cache
def _resnet_ops(depth: int) -> int:
    return resnet(depth, batch=8).graph.n


def _resnet(size: int) -> Graph:
    """A bottleneck ResNet of about ``size`` ops: stages (3, 4, k, 3) with k chosen for the size."""
    base = _resnet_ops(50)
    per_block = (base - _resnet_ops(101)) / (6 - 23)
    k = max(1, round(6 + (size - base) / per_block))
    depth = 3 * (3 + 4 + k + 3) + 2
    RESNET_STAGES.setdefault(depth, (3, 4, k, 3))  # the zoo names ResNets by depth; this one is ours
    return resnet(depth, batch=8).graph


def _gpt(size: int, cluster: str, seed: int) -> tuple[Graph, Cluster]:
    heads = 8
    layers = max(1, round((size - 14) / (43 + 10 * heads)))
    w = gpt3(None, layers=layers, hidden=512, heads=heads, seq_len=512, cluster=cluster)
    return _noisy(w.graph, seed), w.cluster


def _transformer(size: int) -> Graph:
    return transformer(layers=max(1, round((size - 2) / 12)), hidden=768, heads=12, seq_len=256, batch=4,
                       granularity="operator").graph


TARNAWSKI_SLOWDOWN = 23.0  # BERT-3's host time over its accelerator time, op by op (Tarnawski's operator inputs)
TARNAWSKI_SHARE = 2.5  # the graph's memory over one accelerator's: it needs three of the four, as BERT-3 does


def _bert(size: int) -> Graph:
    """An operator-level transformer of about ``size`` ops in Tarnawski's style: per-head attention ops (the zoo's
    GPT-3 graph, hidden 1024, 4 heads, 128 tokens), accelerator time the first Table III GPU's, host time
    :data:`TARNAWSKI_SLOWDOWN` times it."""
    heads = 4
    w = gpt3(None, layers=max(1, round((size - 14) / (43 + 10 * heads))), hidden=1024, heads=heads, seq_len=128)
    kind = w.cluster.devices[0].kind
    ops = [op.model_copy(update={"work": {"accelerator": op.work[kind], "cpu": op.work[kind] * TARNAWSKI_SLOWDOWN}})
           for op in w.graph.ops]
    return Graph(ops, [(w.graph.names[u], w.graph.names[v]) for u, v in zip(w.graph.src, w.graph.dst)],
                 name=f"bert-{size}")


def tarnawski_problem(graph: Graph) -> Problem:
    """Tarnawski's latency setting as the command line's ``--objective latency --method ip`` means it (hard
    memory, contiguous splits) on four accelerators that together hold the graph :data:`TARNAWSKI_SHARE` times
    (each at least its largest op) and a CPU."""
    mem = np.asarray(graph.param_bytes + graph.activation_bytes, dtype=float)
    cluster = default_cluster(4, 1, memory=max(float(mem.sum()) / TARNAWSKI_SHARE, 1.05 * float(mem.max())))
    return Problem(graph, cluster, Latency(), [Memory(), Contiguous()])


LAYER_SLOWDOWN = 10.0  # host time over accelerator time, op by op, in Tarnawski's layer inputs (median)
LAYER_SHARE = 7.8  # the graph's memory over one accelerator's in Tarnawski's InceptionV3 layer input


def _inception(seed: int) -> Graph:
    """The zoo's Inception-v3 (batch 8, 120 ops: modules of parallel branches between concatenations) in
    Tarnawski's layer style: host time :data:`LAYER_SLOWDOWN` times the accelerator's, ``seed``'s noise."""
    g = inception(batch=8).graph
    ops = [op.model_copy(update={"work": {"accelerator": op.work["accelerator"],
                                          "cpu": op.work["accelerator"] * LAYER_SLOWDOWN}}) for op in g.ops]
    return _noisy(Graph(ops, [(g.names[u], g.names[v]) for u, v in zip(g.src, g.dst)], name="inception"), seed)


def layers_problem(graph: Graph) -> Problem:
    """Tarnawski's layer inputs' setting (hard memory, contiguous splits): twelve accelerators that together hold
    the graph ``12 / LAYER_SHARE`` times (each at least its largest op) and eight CPUs."""
    mem = np.asarray(graph.param_bytes + graph.activation_bytes, dtype=float)
    cluster = default_cluster(12, 8, memory=max(float(mem.sum()) / LAYER_SHARE, 1.05 * float(mem.max())))
    return Problem(graph, cluster, Latency(), [Memory(), Contiguous()])


def makespan_problem(graph: Graph, cluster: Cluster) -> Problem:
    return Problem(graph, cluster, Makespan(), [Memory(), Congestion("port")])


def latency_problem(graph: Graph, cluster: Cluster) -> Problem:
    return Problem(graph, cluster, Latency(), [Memory()])


LINKED_SPEEDS = (2.0, 1.0, 0.5)  # the linked family's accelerators, in an order drawn by the seed ...
LINKED_MEMORY = (1.2, 1.0, 2.0)  # ... their memories, times 40 % of the graph's (it needs two of them)


def _linked_graphs() -> dict[str, Callable[[], Graph]]:
    RESNET_STAGES.setdefault(14, (1, 1, 1, 1))  # a ResNet of one block per stage (24 ops); the zoo's start at 50
    return {"transformer": lambda: transformer(layers=2, hidden=256, heads=4, seq_len=64, batch=4, vocab=1000,
                                               granularity="operator").graph,
            "resnet": lambda: resnet(14, batch=8).graph, "inception": lambda: inception(batch=8).graph,
            "dag": _random_dag}


def _random_dag(n: int = 30) -> Graph:
    """A random DAG of ``n`` ops, each reading one to three of the six before it; accelerator times 0.1-3, CPU 3-10
    times that, tensors and weights of 10^4-10^6 bytes."""
    rng = np.random.default_rng(n)
    ops = [Op(name=f"v{i}", work={"accelerator": (w := float(rng.uniform(0.1, 3.0))), "cpu": w * rng.uniform(3, 10)},
              param_bytes=float(10 ** rng.uniform(4, 6)), out_bytes=float(10 ** rng.uniform(4, 6))) for i in range(n)]
    edges = {(f"v{j}", f"v{i}") for i in range(1, n)
             for j in rng.choice(range(max(0, i - 6), i), size=min(i, int(rng.integers(1, 4))), replace=False)}
    return Graph(ops, sorted(edges), name=f"dag{n}")


def linked_cluster(graph: Graph, seed: int, cpu: bool) -> Cluster:
    """Three accelerators (:data:`LINKED_SPEEDS`, :data:`LINKED_MEMORY`) in an order drawn by ``seed`` on a line of
    links ``g0 - g1 - g2``, each link's bandwidth 0.5-8 times the graph's mean tensor per mean op time and its latency
    0-0.5 mean op times (drawn), and with ``cpu`` a CPU linked to ``g0`` (a quarter of the bandwidth, twice the
    latency of the first link)."""
    rng = np.random.default_rng(seed)
    mem = float(np.sum(graph.param_bytes + graph.activation_bytes)) / 2.5
    op_time, tensor = float(np.mean(graph.work("accelerator"))), float(np.mean(graph.out_bytes))
    order = rng.permutation(3)
    devices = [Device(name=f"g{k}", speed=LINKED_SPEEDS[i], memory=mem * LINKED_MEMORY[i]) for k, i in enumerate(order)]
    hops = [(f"g{k}", f"g{k + 1}", tensor / op_time * rng.choice((0.5, 2.0, 8.0)), op_time * rng.uniform(0, 0.5))
            for k in range(2)]
    if cpu:
        devices.append(Device(name="c0", kind="cpu"))
        hops.append(("g0", "c0", hops[0][2] / 4, hops[0][3] * 2))
    return Cluster(devices, [Link(src=s, dst=d, bandwidth=b, latency=t) for a, c, b, t in hops for s, d in ((a, c), (c, a))])


def linked_cases(seeds: list[int]) -> list[Case]:
    """The linked family (module docstring) as latency problems with hard memory."""
    return [Case(f"{name}-s{seed}@3acc-line{'+cpu' if cpu else ''}",
                 lambda b=build, s=seed, h=cpu: latency_problem((g := b()), linked_cluster(g, s, h)))
            for name, build in _linked_graphs().items() for cpu in (False, True) for seed in seeds]


def bench_linked(case: Case, time_limit: float) -> list[Any]:
    """latency-best, the exact formulation among DAG-ordered splits and ``solve`` over all, next to one another."""
    p = case.problem
    ours = heuristic("latency-best", p, time_limit)
    cells: list[Any] = [case.name, p.graph.n, _cell(ours), ours.get("by", "—"), fmt(ours["seconds"], ".1f")]
    best = math.inf
    for problem in (Problem(p.graph, p.cluster, Latency(), [Memory(), DagOrder()]), p):
        t0 = time.perf_counter()
        r = solve(problem, time_limit=time_limit)
        ok = r.placement is not None and problem.is_valid(r.placement)
        best = min(best, r.objective if ok else math.inf)
        cells += [f"{r.objective:.6g}" if ok else "—", fmt(r.bound, ".6g"), r.status.value,
                  fmt(time.perf_counter() - t0, ".1f")]
    gap = ours["value"] / best - 1 if ours.get("value") and math.isfinite(best) else None
    return [*cells, fmt(gap, "+.1%")]


LINKED_HEAD = ["input", "ops", "latency-best", "by", "s", "exact (DAG order)", "bound", "status", "s", "solve",
               "bound", "status", "s", "latency-best vs best"]


def generated(sizes: list[int], seeds: list[int], gpt3_330m: bool) -> list[Case]:
    cases = []
    for size in sizes:
        for seed in seeds:
            for scenario in sorted(TABLE_III):
                ratio = FIG10[scenario]
                anchor = f"Fig. 10 speedup ≤ {ratio['m-sct']}x m-SCT, {ratio['getf']}x GETF"
                cases.append(Case(f"gpt-{size}-s{seed}@{scenario}",
                                  lambda n=size, s=seed, sc=scenario: makespan_problem(*_gpt(n, sc, s)),
                                  anchor, scenario))
                cases.append(Case(f"resnet-{size}-s{seed}@{scenario}",
                                  lambda n=size, s=seed, sc=scenario: makespan_problem(
                                      _noisy(_on_gpus(_resnet(n), sc), s), moirai_cluster(sc)), anchor, scenario))
            cases.append(Case(f"transformer-{size}-s{seed}@{TARNAWSKI_CLUSTER}",
                              lambda n=size, s=seed: latency_problem(_noisy(_transformer(n), s), default_cluster(3, 1))))
            cases.append(Case(f"resnet-{size}-s{seed}@{TARNAWSKI_CLUSTER}",
                              lambda n=size, s=seed: latency_problem(_noisy(_resnet(n), s), default_cluster(3, 1))))
            for family, build in (("bert", _bert), ("cnn", _resnet)):
                cases.append(Case(f"{family}-{size}-s{seed}@{TARNAWSKI_MEMORY}",
                                  lambda n=size, s=seed, b=build: tarnawski_problem(_noisy(b(n), s)),
                                  "latency-best's value (no paper value: a graph nobody has)"))
    for seed in seeds:  # the zoo's Inception has one size
        cases.append(Case(f"inception-s{seed}@{TARNAWSKI_LAYERS}", lambda s=seed: layers_problem(_inception(s)),
                          "latency-best's value (no paper value: a graph nobody has)"))
    if gpt3_330m:
        for scenario in sorted(TABLE_III):
            anchor = ("Table V: m-SCT {m-sct} s, GETF {getf} s, MOIRAI {ours} s; ".format(**TABLE_V_330M)
                      + f"Fig. 10 ≤ {FIG10[scenario]['m-sct']}x / {FIG10[scenario]['getf']}x")
            cases.append(Case(f"gpt3-330M@{scenario}", lambda sc=scenario: _gpt3_330m(sc), anchor, scenario))
    return cases


def _gpt3_330m(scenario: str) -> Problem:
    w = gpt3("330M", cluster=scenario)
    return makespan_problem(w.graph, w.cluster)


BERT_LAYERS = (6, 12)  # encoder layers of the BERT-N family: 397 and 721 ops (users met BERT-6 at 418 ops, and 783)


def bert_layers(source: dict[str, Any], layers: int, seed: int) -> dict[str, Any]:
    """Tarnawski's BERT-3 operator input (``source``, the file's mapping) with its middle encoder layer repeated to
    ``layers`` layers: layer 1's ops (the ancestors of its output LayerNorm that are not layer 0's, its own
    weights) copied ``layers - 3`` times between layers 1 and 2, each copy reading the previous one's output and the
    ops every layer shares (the attention mask), with colocation classes of its own (a copy's op is colocated with
    its own layer's, as the file's ops are); seed ``s > 0``: every op's times times a log-normal factor of
    sigma 0.1 drawn from ``s``. ``maxFPGAs`` grows with the weights, so that the accelerators are as full as BERT-3's
    (60 %: 6 for BERT-6, 10 for BERT-12); the memory per accelerator is BERT-3's."""
    nodes = {n["id"]: n for n in source["nodes"]}
    preds: dict[int, list[int]] = {i: [] for i in nodes}
    for e in source["edges"]:
        preds[e["destId"]].append(e["sourceId"])

    def ancestors(v: int) -> set[int]:
        seen, stack = set(), [v]
        while stack:
            u = stack.pop()
            if u not in seen:
                seen.add(u)
                stack.extend(preds[u])
        return seen

    def output_norm(layer: int) -> int:  # the op of the layer's output LayerNorm (its colocation class) read outside it
        weight = next(n for n in nodes.values() if n["name"] == f"bert.encoder.layer.{layer}.output.LayerNorm.weight")
        norm = {i for i, n in nodes.items() if n.get("colorClass") == weight["colorClass"]}
        return next(e["sourceId"] for e in source["edges"] if e["sourceId"] in norm and e["destId"] not in norm)

    first, middle = output_norm(0), output_norm(1)
    layer = {i for i in ancestors(middle) - ancestors(first)
             if ".layer." not in nodes[i]["name"] or ".layer.1." in nodes[i]["name"]}
    out_nodes = list(source["nodes"])
    out_edges = [e for e in source["edges"] if e["sourceId"] != middle or e["destId"] in layer]
    onward = [e for e in source["edges"] if e["sourceId"] == middle and e["destId"] not in layer]
    fresh, previous = max(nodes) + 1, middle
    colours = 1 + max((n["colorClass"] for n in nodes.values() if "colorClass" in n), default=-1)
    for copy in range(layers - 3):
        ids = {i: fresh + k for k, i in enumerate(sorted(layer))}
        fresh += len(ids)
        out_nodes += [{**nodes[i], "id": ids[i], "name": f"{nodes[i]['name']}#{copy}",
                       **({"colorClass": nodes[i]["colorClass"] + (copy + 1) * colours} if "colorClass" in nodes[i]
                          else {})} for i in sorted(layer)]
        out_edges += [{**e, "sourceId": ids.get(e["sourceId"], previous if e["sourceId"] == first else e["sourceId"]),
                       "destId": ids[e["destId"]]} for e in source["edges"] if e["destId"] in layer]
        previous = ids[middle]
    out_edges += [{**e, "sourceId": previous} for e in onward]
    if seed:
        rng = np.random.default_rng(seed)
        out_nodes = [{**n, "cpuLatency": n["cpuLatency"] * f, "fpgaLatency": n["fpgaLatency"] * f}
                     for n, f in zip(out_nodes, rng.lognormal(0.0, 0.1, len(out_nodes)))]
    share = sum(n.get("size", 0.0) for n in source["nodes"]) / (source["maxFPGAs"] * source["maxSizePerFPGA"])
    need = sum(n.get("size", 0.0) for n in out_nodes) / source["maxSizePerFPGA"]
    return {**source, "nodes": out_nodes, "edges": out_edges, "maxFPGAs": math.ceil(need / share)}


def bert_family(data: Path, seeds: list[int]) -> list[Case]:
    """BERT-N (:func:`bert_layers`) as the command line's ``--objective latency --method ip`` means it; anchor:
    latency-best's value (the column beside ours)."""
    path = data / "dnn-partitioning" / "latency-inputs" / "OperatorGraphs" / "bert_l-3_inference.json"
    if not path.exists():
        return []
    from placement_dsl.io import Workload
    from placement_dsl.io.dnn_partitioning import cluster_from_dict, graph_from_dict
    from placement_dsl.presets import problem_for_method

    def build(layers: int, seed: int) -> Problem:
        found = bert_layers(json.loads(path.read_text()), layers, seed)
        w = Workload(graph_from_dict(found, f"bert{layers}-s{seed}"), cluster_from_dict(found), "dnn-partitioning", {})
        return problem_for_method(w, "latency", "ip")

    return [Case(f"bert{layers}-s{seed}@tarnawski", lambda n=layers, s=seed: build(n, s),
                 "latency-best's value (BERT-3's layers repeated: no paper value)")
            for layers in BERT_LAYERS for seed in seeds]


def tarnawski(data: Path) -> list[Case]:
    root = data / "dnn-partitioning"
    table = root / "paper_latency.csv"
    if not table.exists():
        print(f"skipped: no Tarnawski latency inputs at {root}", file=sys.stderr)
        return []
    import csv

    with table.open() as fh:
        paper = {r["file"]: r for r in csv.DictReader(line for line in fh if not line.startswith("#"))}
    from placement_dsl.presets import problem_for_method

    cases = []
    for key, row in sorted(paper.items(), key=lambda kv: int(kv[1]["nodes"])):
        path = root / key
        if path.exists():
            cases.append(Case(path.stem.replace("_inference", ""),
                              lambda p=path: problem_for_method(load_workload(p), "latency", "ip"),
                              f"paper IP {row['ip_latency']} (gap {row['ip_mip_gap']})"))
    return cases


def sheets(data: Path, folder: Path | None = None) -> list[Case]:
    """The MOIRAI sheets of ``data/moirai``, or of ``folder`` (``--sheets``: sheets written elsewhere, e.g. the zoo's
    families exported in MOIRAI's format, one flow per edge; named ``sheet:STEM``)."""
    prefix = "moirai" if folder is None else "sheet"
    folder = folder or data / "moirai"
    if not folder.is_dir():
        print(f"skipped: no MOIRAI sheets at {folder}", file=sys.stderr)
        return []
    cases = []
    for path in sorted(folder.glob("*.xls")):
        optimum = PAPER_OPTIMUM.get(path.stem) if prefix == "moirai" else None
        cases.append(Case(f"{prefix}:{path.stem}", lambda p=path: makespan_problem(*_sheet(p)),
                          "—" if optimum is None else f"optimum {optimum:g}"))
    return cases


def _sheet(path: Path) -> tuple[Graph, Cluster]:
    w = moirai.load(path)
    return w.graph, w.cluster


# ---------------------------------------------------------------------------- one input
def heuristic(method: str, problem: Problem, limit: float, **options: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        r = run(method, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=limit, **options)
    except PlacementError as err:
        return {"value": None, "reason": str(err)[:200], "seconds": time.perf_counter() - t0}
    ev = problem.evaluate(r.placement)
    return {"value": ev.objective, "valid": ev.valid and not problem.violations(r.placement),
            "seconds": time.perf_counter() - t0, "stopped": r.info.get("stopped"), "placement": r.placement,
            **({"by": r.info["best"]} if "best" in r.info else {})}


def best_heuristic(problem: Problem, limit: float) -> dict[str, Any]:
    if goal(problem) == "latency":  # Tarnawski's invocations; Makespan is Latency's alias, so not by the objective
        out = heuristic("latency-best", problem, limit)
        out["method"] = "latency-best"
        return out
    found = {m: heuristic(m, problem, limit) for m in ("cpop", "list")}
    valid = {m: r for m, r in found.items() if r["value"] is not None}
    if not valid:
        return {**found["cpop"], "method": "cpop"}
    start = min(valid, key=lambda m: valid[m]["value"])
    out = heuristic("schedule-ls", problem, limit, start=valid[start]["placement"])
    out["seconds"] += sum(r["seconds"] for r in found.values())
    out["method"] = f"schedule-ls from {start}"
    return out


def bench(case: Case, time_limit: float) -> dict[str, Any]:
    row = _bench(case, time_limit)
    row["ours"]["over"] = row["ours"].get("seconds", 0.0) > time_limit + OVERRUN
    return row


def _bench(case: Case, time_limit: float) -> dict[str, Any]:
    p = case.problem
    limit = max(5.0, time_limit / 10)
    row: dict[str, Any] = {"input": case.name, "ops": p.graph.n, "objective": type(p.objective).__name__.lower(),
                           "anchor": case.anchor}
    row["best heuristic"] = best_heuristic(p, limit)
    for method in BASELINES:
        row[method] = heuristic(method, p, limit)
    t0 = time.perf_counter()
    try:
        r = solve(p, time_limit=time_limit)
        ev = p.evaluate(r.placement) if r.placement is not None else None
        row["ours"] = {"value": r.objective, "valid": ev is not None and ev.valid, "status": r.status.value,
                       "bound": r.bound, "gap": relative_gap(r.objective, r.bound), "seconds": time.perf_counter() - t0,
                       "phases": r.timings.to_dict(), "formulation": r.formulation, "message": r.message[:200]}
    except PlacementError as err:
        row["ours"] = {"value": None, "reason": str(err)[:200], "seconds": time.perf_counter() - t0}
    if case.scenario:
        ours = row["ours"].get("value")
        row["speedup"] = {m: (row[m]["value"] / ours if ours and row[m].get("value") else None)
                          for m in ("m-sct", "getf")}
    for cell in row.values():
        if isinstance(cell, dict):
            cell.pop("placement", None)
    return row


# ---------------------------------------------------------------------------- output
HEAD = ["input", "ops", "obj", "best heuristic", "m-SCT", "GETF", "HEFT", "one device", "ours", "bound", "gap",
        "status", "wall s", "start / build / search / coarse / lns / again / restarts s", "anchor"]
OVERRUN = 5.0  # seconds a solve may run past its limit


def _cell(r: dict[str, Any]) -> str:
    if r.get("value") is None:
        return "—"
    mark = "" if r.get("valid", True) else "*"
    return f"{r['value']:.6g}{mark}" + (" (stopped)" if r.get("stopped") else "")


def print_row(row: dict[str, Any]) -> None:
    ours = row["ours"]
    ph = ours.get("phases") or {}
    phases = (f"{ph.get('start', 0):.1f} / {ph.get('build', 0) + ph.get('handoff', 0):.1f} / "
              f"{ph.get('solve', 0):.1f} / {ph.get('coarse', 0):.1f} / {ph.get('lns', 0):.1f} / "
              f"{ph.get('again', 0):.1f} / {ph.get('restarts', 0):.1f}") if ph else "—"
    wall = fmt(ours.get("seconds"), ".1f") + (" OVER" if ours.get("over") else "")
    anchor = row["anchor"]
    if "speedup" in row:
        s = row["speedup"]
        anchor += "; ours: " + ", ".join(f"{fmt(s[m], '.2f')}x {m}" for m in ("m-sct", "getf"))
    markdown_row([row["input"], row["ops"], row["objective"], _cell(row["best heuristic"]), _cell(row["m-sct"]),
                  _cell(row["getf"]), _cell(row["list"]), _cell(row["one-device-best"]), _cell(ours),
                  fmt(ours.get("bound"), ".6g"), fmt(ours.get("gap"), ".1%"),
                  ours.get("status", "error") + (" (model not built)" if "not built" in ours.get("message", "") else ""),
                  wall, phases, anchor])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per solve (default 300; --quick: 20)")
    ap.add_argument("--quick", action="store_true", help="a short run: 20 s, 500 ops, seed 0, no GPT-3 330M")
    ap.add_argument("--only", nargs="+", default=None, help="inputs whose name contains one of these")
    ap.add_argument("--sizes", nargs="+", type=int, default=None, help="ops of the generated graphs")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="seeds of the generated graphs")
    ap.add_argument("--json", type=Path, default=None, help="write every row (with reasons and phases) here")
    ap.add_argument("--data", type=Path, default=SHARED_DATA, help="the reference data folder")
    ap.add_argument("--sheets", type=Path, default=None, help="also every MOIRAI .xls sheet in this folder")
    ap.add_argument("--linked", action="store_true", help="the linked family alone (default: 10 s per solve)")
    args = ap.parse_args()
    if args.linked:
        return linked(args)
    time_limit = args.time_limit if args.time_limit is not None else (20.0 if args.quick else 300.0)
    sizes = args.sizes or ([500] if args.quick else [500, 1000, 2000, 5000])
    seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    if min(sizes) < 1 or not math.isfinite(time_limit) or time_limit <= 0:
        ap.error("--sizes must be positive and --time-limit a positive number of seconds")
    cases = (tarnawski(args.data) + bert_family(args.data, seeds) + sheets(args.data)
             + generated(sizes, seeds, gpt3_330m=not args.quick))
    cases += sheets(args.data, args.sheets) if args.sheets else []
    if args.only:
        cases = [c for c in cases if any(o in c.name for o in args.only)]
    print(f"time limit {time_limit:g} s per solve, heuristics {max(5.0, time_limit / 10):g} s each\n")
    markdown_head(HEAD)
    rows = []
    for case in cases:
        row = bench(case, time_limit)
        rows.append(row)
        print_row(row)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1, default=str))


def linked(args: argparse.Namespace) -> None:
    """``--linked``: the linked family's table (and its rows to ``--json``)."""
    time_limit = args.time_limit if args.time_limit is not None else 10.0
    cases = [c for c in linked_cases(args.seeds if args.seeds is not None else [0, 1, 2])
             if not args.only or any(o in c.name for o in args.only)]
    print(f"time limit {time_limit:g} s per method\n")
    markdown_head(LINKED_HEAD)
    rows = []
    for case in cases:
        rows.append(bench_linked(case, time_limit))
        markdown_row(rows[-1])
        if args.json:
            args.json.write_text(json.dumps([dict(zip(LINKED_HEAD, r)) for r in rows], indent=1, default=str))


if __name__ == "__main__":
    main()
