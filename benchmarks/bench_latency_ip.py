"""Tarnawski et al.'s latency IP (NeurIPS 2020, §4, Fig. 3 / Fig. 4) on the Table 4 workloads, next to the paper's IP.

For every workload of ``latency-inputs`` (``paper_latency.csv``), ``q = 1`` (one contiguous subgraph
per accelerator, Fig. 3) and ``q = 2`` (Fig. 4), and each solver: the warm start (the best latency
heuristic under the same ``q``), the IP's latency, its proven bound and gap, the wall-clock time, and
the paper's IP latency and gap (Gurobi, up to 60 min, stopped at a 1 % gap; Table 4 optimizes
contiguous splits, so its figures belong to ``q = 1``).

Usage::

    python benchmarks/bench_latency_ip.py                          # every workload, q = 1 and 2, HiGHS and SCIP
    python benchmarks/bench_latency_ip.py --time-limit 60 --workloads bert24 gnmt --solvers highs --q 1
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import DNN, fmt, markdown_head, markdown_row, paper_table, require

from placement_dsl.constraints import Memory, Subgraphs
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics import run
from placement_dsl.heuristics.registry import names
from placement_dsl.io import load_workload
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve

NAMES = {"bert_l-3": "BERT-3 (op)", "bert24": "BERT-24", "resnet50": "ResNet50", "inceptionv3": "InceptionV3",
         "gnmt": "GNMT"}
HEAD = ["workload", "q", "solver", "start", "IP latency", "bound", "gap", "seconds", "status", "paper IP", "paper gap"]


def best_start(problem: Problem, q: int) -> tuple[Placement, float, str]:
    """The best heuristic split with at most ``q`` subgraphs per accelerator, its latency and its method."""
    model = CostModel.named("latency", max_subgraphs=q)
    methods = [m for m in ("latency-best", "greedy") if m in names()]
    best = None
    for method in methods:
        found = run(method, problem.graph, problem.cluster, model=model)
        valid = not problem.violations(found.placement)
        if valid and (best is None or found.objective < best[1]):
            best = (found.placement, found.objective, method)
    if best is None:
        raise SystemExit(f"no heuristic found a valid start for {problem.graph.name} with q = {q}")
    return best


def bench(path: Path, q: int, solvers: list[str], time_limit: float, gap: float, paper: dict[str, str]) -> None:
    workload = load_workload(path)
    problem = Problem(workload.graph, workload.cluster, Latency(), [Memory(), Subgraphs(q)])
    t0 = time.perf_counter()
    start, start_latency, method = best_start(problem, q)
    seconds = time.perf_counter() - t0
    name = NAMES.get(path.stem.replace("_inference", ""), path.stem)
    for solver in solvers:
        result = solve(problem, formulation="latency", solver=solver, time_limit=time_limit, gap=gap,
                       warm_start=start)
        paper_ip, paper_gap = (paper["ip_latency"], paper["ip_mip_gap"]) if q == 1 else ("—", "—")
        markdown_row([name, q, solver, f"{start_latency:.2f} ({method}, {seconds:.0f} s)", fmt(result.objective),
                      fmt(result.bound), "—" if result.gap is None else f"{100 * result.gap:.2f} %",
                      f"{result.timings.total:.0f}", result.status.value, paper_ip, paper_gap])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds per solve (default 600)")
    ap.add_argument("--gap", type=float, default=1e-4, help="relative gap at which a solve stops")
    ap.add_argument("--solvers", nargs="+", default=["highs", "scip"])
    ap.add_argument("--q", nargs="+", type=int, default=[1, 2], help="contiguous subgraphs per accelerator")
    ap.add_argument("--workloads", nargs="+", help="workload names (e.g. bert24 gnmt); default: all of Table 4")
    args = ap.parse_args()
    paper = paper_table("paper_latency.csv")
    rows = sorted(paper.items(), key=lambda kv: int(kv[1]["nodes"]))
    print(f"time limit {args.time_limit:.0f} s per solve, gap {args.gap:g}\n")
    markdown_head(HEAD)
    for key, row in rows:
        path = require(DNN / key)
        if args.workloads and path.stem.replace("_inference", "") not in args.workloads:
            continue
        for q in args.q:
            bench(path, q, args.solvers, args.time_limit, args.gap, row)


if __name__ == "__main__":
    main()
