"""Layered DAGs for generated MOIRAI sheets in the solve tests (:func:`placement_dsl.testing.moirai_sheet` writes
them out): layers of up to ``width`` tasks side by side, each task fed by one to three of the layer before; and
random DAGs of ops for the latency tests on linked clusters (:func:`recent_dag`); and whole makespan problems on such
sheets (:func:`layered_sheet`, also the schedule rows of ``benchmarks/bench_model_sizing.py``)."""
from __future__ import annotations

import random

from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.presets import makespan_problem
from placement_dsl.problem import Problem
from placement_dsl.testing import moirai_sheet


def recent_dag(n: int, seed: int, prefix: str, param: tuple[float, float], out: tuple[float, float],
               name: str) -> Graph:
    """A random DAG of ``n`` ops ``prefix0..``: each reads one to three of the twelve ops before it (wide: many ops
    ready at once), its accelerator time 0.1-3, its CPU time 3-10 times that, parameter and output bytes drawn from
    the ranges ``param`` and ``out``."""
    rng = random.Random(seed)
    ops, edges = [], []
    for i in range(n):
        w = round(rng.uniform(0.1, 3.0), 3)
        ops.append(Op(name=f"{prefix}{i}", work={"accelerator": w, "cpu": round(w * rng.uniform(3, 10), 3)},
                      param_bytes=rng.uniform(*param), out_bytes=rng.uniform(*out)))
        if i:
            edges += [(f"{prefix}{j}", f"{prefix}{i}")
                      for j in rng.sample(range(max(0, i - 12), i), k=min(i, rng.randint(1, 3)))]
    return Graph(ops, edges, name=name)


def layered(rng: random.Random, tasks: int, width: int, back: float | None = None) -> tuple[list[list[int]], dict[int, set[int]]]:
    """The layers of tasks ``1..tasks`` and each task's successors: every task fed by one to three of the layer
    before, with probability ``back`` also by one two layers back (``None``: never, no draw), and every task but the
    last layer's feeding at least one of the next."""
    layers, t = [], 1
    while t <= tasks:
        w = min(tasks - t + 1, rng.randint(1, width))
        layers.append(list(range(t, t + w)))
        t += w
    succ: dict[int, set[int]] = {i: set() for i in range(1, tasks + 1)}
    for i, layer in enumerate(layers[1:], start=1):
        for j in layer:
            for p in rng.sample(layers[i - 1], min(len(layers[i - 1]), rng.choice((1, 1, 2, 3)))):
                succ[p].add(j)
            if back is not None and i >= 2 and rng.random() < back:
                succ[rng.choice(layers[i - 2])].add(j)
    for i, layer in enumerate(layers[:-1]):
        for p in layer:
            if not succ[p]:
                succ[p].add(rng.choice(layers[i + 1]))
    return layers, succ


def layered_sheet(tasks: int, devices: int, seed: int) -> Problem:
    """A MOIRAI sheet of ``tasks`` tasks in layers of up to ``sqrt(tasks) / 2`` side by side (each task fed by one to
    three of the layer before, sometimes one two layers back), heterogeneous speeds and bandwidths, a flow per edge."""
    rng = random.Random(seed)
    layers, succ = layered(rng, tasks, max(2, int(tasks ** 0.5 / 2)), back=0.15)
    K = devices
    speed = [rng.uniform(0.5, 2.5) for _ in range(K)]
    bandwidth = [[rng.choice((2.0, 5.0, 10.0, 25.0)) for _ in range(K)] for _ in range(K)]

    def draw(i: int, successors: int) -> tuple[float, list[float], list[float]]:
        base = rng.lognormvariate(0, 1) * 0.05
        mi = float(rng.randint(0, 50) * 1000)
        times = [round(base / speed[k] * rng.uniform(0.8, 1.25), 5) for k in range(K)]
        return mi, times, [rng.choice((0.0, 0.1, 0.5, 1.0, 3.0)) for _ in range(successors)]

    graph, cluster = moirai_sheet(lambda i: sorted(succ[i]), tasks, layers[0], bandwidth, draw, 1e12,
                                  f"layered{tasks}-{seed}")
    return makespan_problem(graph, cluster, CostModel.named("makespan"))
