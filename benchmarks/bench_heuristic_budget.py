"""Every heuristic against its time limit: wall seconds next to the limit, per method and generated input.

    python benchmarks/bench_heuristic_budget.py [--limit 5] [--method dp --method slicegraph ...] [--input gpt3-2 ...]

Inputs (generated, no files): GPT-3 operator graphs at MOIRAI's kernel granularity
(:func:`placement_dsl.zoo.gpt3.gpt3`, ``hidden=1024, heads=16, vocab=8192``; ~200 ops per layer) on
MOIRAI's inter-server cluster (Table III), and chains of 20,000 and 200,000 ops built directly on four
identical stages. Each method runs under the makespan model when it schedules, the latency model when
it searches latency, and the max-load model otherwise, through :func:`placement_dsl.heuristics.run`
with ``--limit`` seconds. A row: the wall seconds (the run, the cost model's re-check included), the
limit, the result (``stopped`` at the limit, ``declined`` with the reason's start, or done), and the
objective. A method over ``limit + slack`` is flagged ``OVER``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from common import fmt, markdown_head, markdown_row

from placement_dsl.cluster import Cluster
from placement_dsl.errors import PlacementError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import names, run
from placement_dsl.heuristics.registry import optimizes
from placement_dsl.zoo.gpt3 import gpt3

SLACK = 10.0  # seconds past the limit a row may take before it is flagged (the cost model's re-check, a fallback)


def chain(n: int) -> tuple[Graph, Cluster]:
    rng = np.random.default_rng(0)
    g = Graph([Op(name=f"v{i}", work=float(rng.random()), out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)], name=f"chain-{n}")
    return g, Cluster.stages(4)


def inputs(names: list[str] | None) -> dict[str, tuple[Graph, Cluster]]:
    build = {"gpt3-2": lambda: _gpt(2), "gpt3-8": lambda: _gpt(8), "chain-20k": lambda: chain(20_000),
             "chain-200k": lambda: chain(200_000)}
    return {name: build[name]() for name in (names or list(build))}


def _gpt(layers: int) -> tuple[Graph, Cluster]:
    w = gpt3(None, layers=layers, hidden=1024, heads=16, vocab=8192, cluster="inter-server")
    return w.graph, w.cluster


def model_for(method: str) -> CostModel:
    goal = optimizes(method)
    return CostModel.named("makespan" if goal == "makespan" else "latency" if goal == "latency" else "throughput")


def row(name: str, graph: Graph, cluster: Cluster, method: str, limit: float) -> None:
    t0 = time.perf_counter()
    try:
        res = run(method, graph, cluster, model=model_for(method), time_limit=limit)
        what = "stopped" if res.info.get("stopped") else "done"
        objective = fmt(res.objective, ".6g")
    except PlacementError as err:
        what, objective = f"declined: {str(err)[:60]}", ""
    wall = time.perf_counter() - t0
    markdown_row([name, graph.n, method, fmt(wall, ".1f"), fmt(limit, ".0f"), what, objective,
                  "OVER" if wall > limit + SLACK else ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=5.0, help="time limit in seconds per run")
    ap.add_argument("--method", action="append", choices=sorted(names()), help="method (default: all)")
    ap.add_argument("--input", action="append", choices=["gpt3-2", "gpt3-8", "chain-20k", "chain-200k"],
                    help="generated input (default: all)")
    args = ap.parse_args()
    markdown_head(["input", "ops", "method", "wall s", "limit s", "result", "objective", ""])
    for name, (graph, cluster) in inputs(args.input).items():
        for method in args.method or sorted(names()):
            row(name, graph, cluster, method, args.limit)


if __name__ == "__main__":
    main()
