"""A model's build is estimated before it is built: its nonzeros counted from the graph, times a rate in CPU seconds
per nonzero measured on builds (``placement_dsl.sizing``), times the machine's contention.

For the latency model (Tarnawski Fig. 3 / Fig. 4) on generated invocation graphs, the throughput model on zoo graphs
and the schedule model (MOIRAI's makespan, its pair orders written as big-M rows) on generated layered
sheets of 107 to 897 ops (and, with ``--seeds``, more generated graphs of each size), build and extract each model
three times and print its least CPU seconds next to the estimate on an idle machine, with the estimated and the built
nonzeros, and the least CPU seconds of the build and of the extraction apart. The anchor:
the estimate within 0.5-2 times the build (``ratio``). CPU seconds of a build vary with the host (1.5-3 times apart on
the same graph between runs on a shared virtual machine), so this is measured here, not in the tests; the tests hold
the count of nonzeros the estimate rests on.

Usage::

    python benchmarks/bench_model_sizing.py
    python benchmarks/bench_model_sizing.py --seeds 1,2,3
    python benchmarks/bench_model_sizing.py --only schedule --repeats 1
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

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
SCHEDULE_SIZES = [(40, 3), (120, 4), (200, 4), (300, 4)]  # tasks and devices of the layered sheets: 107-897 ops
THROUGHPUT_MODELS = [("transformer-small", 4), ("gpt2-medium-layers", 8), ("resnet50", 8), ("inception-v3-ish", 8),
                     ("bert-large-ops", 4)]


def measure(label: str, problem: Problem, repeats: int) -> None:
    form = get("auto", problem)
    extract(compile(problem, form).model)  # the first build in a process loads Pyomo's writers
    best, build, hand_off, built = float("inf"), float("inf"), float("inf"), 0
    for _ in range(repeats):
        began = time.process_time()
        model = compile(problem, form).model
        compiled = time.process_time()
        built = len(extract(model).value)
        ended = time.process_time()
        best, build, hand_off = min(best, ended - began), min(build, compiled - began), min(hand_off, ended - compiled)
    estimate = build_seconds(problem, form, loaded=False)
    markdown_row([label, problem.graph.n, f"{estimate_nonzeros(problem, form):,.0f}", f"{built:,}", f"{estimate:.3f}",
                  f"{best:.3f}", f"{build:.3f}", f"{hand_off:.3f}", f"{best / built:.2e}", f"{estimate / best:.2f}"])


def layered_sheet(tasks: int, devices: int, seed: int) -> Problem:
    """The solve tests' generated MOIRAI sheet (``tests/solve/sheets.py``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.solve.sheets import layered_sheet as sheet

    return sheet(tasks, devices, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1", help="seeds of the generated graphs and sheets, comma-separated")
    parser.add_argument("--only", default="latency,throughput,schedule", help="the models to measure, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="builds of each model (the least CPU time is printed)")
    args = parser.parse_args()
    only, seeds = args.only.split(","), [int(s) for s in args.seeds.split(",")]
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; anchor: ratio 0.5-2")
    markdown_head(["model", "ops", "nonzeros est.", "nonzeros built", "est. s (idle)", "build+extract CPU s",
                   "build CPU s", "extract CPU s", "s per nonzero", "ratio"])
    for seed in seeds if "latency" in only else []:
        for n, k in LATENCY_SIZES:
            g, c = invocation_workload(seed + n, n=n, k=k)
            measure(f"latency invocation n={n} k={k} seed={seed}", Problem(g, c, Latency(), [Memory(), Contiguous()]),
                    args.repeats)
    for name, k in THROUGHPUT_MODELS if "throughput" in only else []:
        w = zoo_model(name)
        acc = next(d for d in w.cluster.devices if not d.host)
        measure(f"throughput {name} k={k}", Problem(w.graph, Cluster.accelerators(k, memory=acc.memory,
                bandwidth=acc.bandwidth), Throughput(), [Memory(), Contiguous()]), args.repeats)
    for seed in seeds if "schedule" in only else []:
        for tasks, k in SCHEDULE_SIZES:
            measure(f"schedule layered sheet tasks={tasks} k={k} seed={seed}", layered_sheet(tasks, k, seed),
                    args.repeats)


if __name__ == "__main__":
    main()
