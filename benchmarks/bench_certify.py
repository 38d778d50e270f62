"""Certified throughput optima on Tarnawski et al.'s inputs (NeurIPS 2020, Table 1).

(a) Contiguous splits: the DP over ideals (time, value) and the chain MIP with ancestor cuts and
position windows at ``T* = DP / 1.01`` warm-started by the DP (``solve(..., formulation="chain")``):
time to certify a 1 % gap over the DP class, final bound ``min(T*, solver bound)`` and gap, per
solver, next to the paper's ``ip_contig_tps`` and ``dp_tps``.

(b) Non-contiguous splits: Tarnawski's throughput IP without contiguity warm-started by the DP's
split polished by iterated local search (``--start polish``, the default; ``--start dp`` for the DP alone),
its objective against ``ip_noncontig_tps`` (within 1 %?), its dual bound and gap.

Every objective is the cost model's value of the returned placement (``solve`` re-evaluates it).

Measured (b), HiGHS 1 thread, 60 s, 2 shared cores; ours / bound / gap % with ``--start dp`` then
``--start polish``: within 1 % proven on 3 of 10 from the DP (the BERT-24 rows stalled at 13.9 % and
8.8 %, ResNet50 training at 78.63, 3.6 %), on 7 of 10 from polish, every objective at or below the
paper's within 1 % (ResNet50 training 76.65 = paper; InceptionV3 51.26 and 117.19 below 51.52 and
117.72). Short of 1 %: GNMT inference 31.69 / 31.19 (1.57), ResNet50 inference 33.38 / 33.02 (1.07),
ResNet50 training 76.65 / 75.80 (1.11): their dual bounds, not the splits, are what is missing.
``certify(problem, budget=60)`` (levels simple, dp + polish, superblock, throughput) closes two of
them with the superblock relaxation's bound over all placements: ResNet50 training 76.65 / 75.90
(0.98 %, 33 s), ResNet50 inference 33.38 / 33.07 (0.94 %, 32 s); GNMT inference stays at 31.69 / 31.19
(superblock 30.30, 1.57 %, 60 s).

Usage::

    python benchmarks/bench_certify.py --quick                      # the three smallest workloads
    python benchmarks/bench_certify.py --solvers highs scip --parts contiguous
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import fmt, throughput_inputs
from common import input_key as _key
from common import markdown_head as table
from common import paper_table as paper_rows

from placement_dsl.cli.problems import problem_for_method
from placement_dsl.heuristics import run
from placement_dsl.io import load_workload
from placement_dsl.solve import solve

CERTIFY_GAP = 0.01


def _name(path: Path) -> str:
    return f"{path.parent.name[:-6].lower()}/{path.stem}"


def num(text: str) -> float | None:
    """A paper figure (``"-"`` = not reported)."""
    try:
        return float(text)
    except ValueError:
        return None


def contiguous(path: Path, solvers: list[str], time_limit: float, paper: dict[str, str]) -> list[list[str]]:
    problem = problem_for_method(load_workload(path), method="ip")
    t0 = time.perf_counter()
    dp = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    t_dp = time.perf_counter() - t0
    dp_value = problem.evaluate(dp.placement).objective
    rows = []
    for solver in solvers:
        res = solve(problem, formulation="chain", solver=solver, time_limit=time_limit, gap=CERTIFY_GAP,
                    warm_start=dp.placement, windows=True, method="chain")
        assert res.bound is None or res.bound <= res.objective + 1e-9
        certified = res.gap is not None and res.gap <= CERTIFY_GAP + 1e-9
        rows.append([_name(path), solver, fmt(t_dp, ".1f"), fmt(dp_value), fmt(res.seconds if certified else None, ".1f"),
                     fmt(res.objective), fmt(res.bound), fmt(None if res.gap is None else 100 * res.gap),
                     res.status.value, res.found_by, fmt(num(paper["dp_tps"])), fmt(num(paper["ip_contig_tps"]))])
    return rows


def noncontiguous(path: Path, solver: str, time_limit: float, paper: dict[str, str], start: str) -> list[str]:
    problem = problem_for_method(load_workload(path), method="ip-noncontig")
    model = problem.cost_model()
    dp = run("dp", problem.graph, problem.cluster, model=model)
    t0 = time.perf_counter()
    polished = run("polish", problem.graph, problem.cluster, model=model, start=dp.placement) if start == "polish" else dp
    t_polish = time.perf_counter() - t0
    res = solve(problem, formulation="throughput", solver=solver, time_limit=time_limit, gap=1e-4,
                warm_start=polished.placement, method="ip-noncontig")
    assert res.bound is None or res.bound <= res.objective + 1e-9
    ref = num(paper["ip_noncontig_tps"])
    within = None if ref is None or res.objective is None else res.objective <= ref * (1 + CERTIFY_GAP)
    return [_name(path), solver, fmt(problem.evaluate(dp.placement).objective),
            fmt(problem.evaluate(polished.placement).objective), fmt(t_polish, ".1f"), fmt(res.objective),
            fmt(ref), {None: "—", True: "yes", False: "no"}[within], fmt(res.bound), fmt(None if res.gap is None else 100 * res.gap),
            res.status.value, fmt(res.seconds, ".1f"), str(res.start_accepted), paper["ip_noncontig_runtime"]]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the three smallest workloads only")
    ap.add_argument("--solvers", nargs="+", default=["highs"], help="solvers for the contiguous part (highs, scip)")
    ap.add_argument("--parts", nargs="+", default=["contiguous", "noncontiguous"],
                    choices=["contiguous", "noncontiguous"])
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    ap.add_argument("--start", choices=["dp", "polish"], default="polish",
                    help="non-contiguous warm start: the DP's split, or polish's local search from it (default)")
    args = ap.parse_args(argv)
    paper = paper_rows()
    paths = throughput_inputs(paper, args.quick)
    print(f"time limit {args.time_limit:g} s per solve, 1 thread; certify = gap <= {CERTIFY_GAP:.0%}")
    if "contiguous" in args.parts:
        print("\n(a) contiguous: DP over ideals, then the chain MIP with windows at DP/1.01 (bound over the DP class)")
        table(["workload", "solver", "DP s", "DP", "t(1%) s", "ours", "bound", "gap %", "status", "found by",
               "paper dp", "paper ip_contig"])
        for path in paths:
            for row in contiguous(path, args.solvers, args.time_limit, paper[_key(path)]):
                print("| " + " | ".join(row) + " |", flush=True)
    if "noncontiguous" in args.parts:
        print(f"\n(b) non-contiguous: throughput IP without contiguity, warm-started by {args.start} (bound over all splits)")
        table(["workload", "solver", "DP", "start", "start s", "ours", "paper ip_noncontig", "within 1 %", "bound", "gap %", "status",
               "s", "start accepted", "paper time"])
        for path in paths:
            print("| " + " | ".join(noncontiguous(path, args.solvers[0], args.time_limit, paper[_key(path)], args.start)) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
