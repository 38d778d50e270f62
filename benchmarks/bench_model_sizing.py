"""A model's build is estimated before it is built: its nonzeros counted from the graph, times a rate in CPU seconds
per nonzero measured on builds (``placement_dsl.sizing``), times the machine's contention.

For the latency model (Tarnawski Fig. 3 / Fig. 4) on generated invocation graphs and the throughput model on zoo
graphs (and, with ``--seeds``, more generated graphs of each size), build and extract each model three times and print
its least CPU seconds next to the estimate on an idle machine, with the estimated and the built nonzeros. The anchor:
the estimate within 0.5-2 times the build (``ratio``). CPU seconds of a build vary with the host (1.5-3 times apart on
the same graph between runs on a shared virtual machine), so this is measured here, not in the tests; the tests hold
the count of nonzeros the estimate rests on.

Usage::

    python benchmarks/bench_model_sizing.py
    python benchmarks/bench_model_sizing.py --seeds 1,2,3
"""
from __future__ import annotations

import argparse
import os
import time

from common import markdown_head, markdown_row

from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.formulations import get
from placement_dsl.objectives import Latency, Throughput
from placement_dsl.problem import Problem
from placement_dsl.sizing import build_seconds, estimate_nonzeros
from placement_dsl.solvers.matrix import extract
from placement_dsl.testing import invocation_workload
from placement_dsl.zoo import get as zoo_model

LATENCY_SIZES = [(12, 2), (24, 3), (48, 3), (96, 4), (140, 4)]
THROUGHPUT_MODELS = [("transformer-small", 4), ("gpt2-medium-layers", 8), ("resnet50", 8), ("inception-v3-ish", 8),
                     ("bert-large-ops", 4)]


def measure(label: str, problem: Problem) -> None:
    form = get("auto", problem)
    extract(compile(problem, form).model)  # the first build in a process loads Pyomo's writers
    best, built = float("inf"), 0
    for _ in range(3):
        began = time.process_time()
        built = len(extract(compile(problem, form).model).value)
        best = min(best, time.process_time() - began)
    estimate = build_seconds(problem, form, loaded=False)
    markdown_row([label, problem.graph.n, f"{estimate_nonzeros(problem, form):,.0f}", f"{built:,}", f"{estimate:.3f}",
                  f"{best:.3f}", f"{estimate / best:.2f}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1", help="seeds of the generated invocation graphs, comma-separated")
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; anchor: ratio 0.5-2")
    markdown_head(["model", "ops", "nonzeros est.", "nonzeros built", "est. s (idle)", "build CPU s", "ratio"])
    for seed in (int(s) for s in args.seeds.split(",")):
        for n, k in LATENCY_SIZES:
            g, c = invocation_workload(seed + n, n=n, k=k)
            measure(f"latency invocation n={n} k={k} seed={seed}", Problem(g, c, Latency(), [Memory(), Contiguous()]))
    for name, k in THROUGHPUT_MODELS:
        w = zoo_model(name)
        acc = next(d for d in w.cluster.devices if not d.host)
        measure(f"throughput {name} k={k}", Problem(w.graph, Cluster.accelerators(k, memory=acc.memory,
                bandwidth=acc.bandwidth), Throughput(), [Memory(), Contiguous()]))


if __name__ == "__main__":
    main()
