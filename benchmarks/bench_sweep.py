"""Archer et al. (ICML 2024) Tables 1–3 on the testbed, as a resumable sweep (``placement_dsl.sweep``).

The grid: the 7 PipeDream profiles of ../shared/data/pipedream-profiles (12.5e6 bytes/ms and
16 GiB per stage, as ``bench_bounds.py`` and ``bench_slicegraph.py`` read them) and the zoo's
REGAL-0..5, every k of 2..64, the levels simple, superblock, guess and exact, and the
heuristics slicegraph and brkga. Every (graph, k, level or heuristic) is one task with the
time limit; results go to a SQLite store as they finish, so an interrupted run started again
with the same ``--results`` runs only what is missing. Then the tables print next to the
paper's rows: PipeDream against Table 1 (Google's production models: only the trend is
comparable), REGAL against Table 3, and UB / simple against Table 2.

    python benchmarks/bench_sweep.py --ks 2 4 8 --time-limit 5        # the reduced grid
    python benchmarks/bench_sweep.py --time-limit 900                 # the full grid (days on 2 cores)
    python benchmarks/bench_sweep.py --scheduler tcp://host:8786 ...  # on a Dask cluster

The last table is the best bound any level proved / best UB over every graph, beside
Archer's exact row of Table 1. The k = 8..64 grid at 60 s per task, as measured for
docs/strengthening.md (the DP over ideals only where it finishes: inception_v3's 221,566
ideals in seconds by its descending search, REGAL's exceed the DP's 2 million):

    P=../shared/data/pipedream-profiles R=/tmp/mtpp.db
    python benchmarks/bench_sweep.py --ks 8 16 32 64 --time-limit 60 --levels simple dp stage-cut \
        --testbed $P/alexnet.txt,$P/densenet121.txt,$P/gnmt.txt,$P/resnet18.txt,$P/resnet50.txt,$P/vgg16.txt \
        --workers 1 --results $R
    python benchmarks/bench_sweep.py --ks 8 16 32 64 --time-limit 60 --levels dp --testbed $P/inception_v3.txt \
        --workers 1 --results $R   # 8.7 s / 4.5 s at k = 8 / 16: ratio 1.0000 (was 0.923 at k = 8)
    python benchmarks/bench_sweep.py --ks 8 16 32 64 --time-limit 60 --levels simple stage-cut chain \
        --testbed $P/inception_v3.txt,zoo:regal-0,zoo:regal-1,zoo:regal-2,zoo:regal-3,zoo:regal-4,zoo:regal-5 \
        --workers 1 --results $R
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_bounds import PAPER as PAPER_BOUNDS
from bench_slicegraph import PAPER as PAPER_ORDERINGS
from common import SHARED_DATA, require

from placement_dsl.sweep import (
    DaskExecutor,
    LocalExecutor,
    Store,
    check_graphs,
    expand_testbed,
    plan,
    run_sweep,
    summary,
)

PROFILES = SHARED_DATA / "pipedream-profiles"
KS = (2, 4, 8, 16, 32, 64)
LEVELS = ("simple", "stage-cut", "chain", "superblock", "guess", "exact")
METHODS = ("slicegraph", "brkga")
PAPER_COLUMN = {"pipedream": 0, "regal": 1}  # PAPER_BOUNDS rows: (Table 1, Table 3)
PAPER_METHOD = {"brkga": "brkga-10000"}  # the closest Table 2 row (our BRKGA's default is 1,000 evaluations)


def table(s: dict[str, Any], family: str, ks: list[int]) -> str:
    """Ours (geometric mean, graphs) beside Archer's row for each level, for one testbed family."""
    cell = {(r["level"], r["k"]): r for r in s["bounds"] if r["family"] == family}
    column = PAPER_COLUMN.get(family)
    name = {0: "Table 1", 1: "Table 3"}.get(column, "-")
    lines = [f"\nbest available bound / best UB, {family} graphs: ours (graphs) | Archer {name}",
             f"{'level':<11}" + "".join(f"{'k=' + str(k):>20}" for k in ks)]
    for level in s["levels"]:
        row = f"{level:<11}"
        for k in ks:
            r = cell.get((level, k))
            ours = "-" if r is None or r["geomean"] is None else f"{r['geomean']:.4f} ({r['count']})"
            ref = ("" if column is None or k not in KS or level not in PAPER_BOUNDS
                   else f" | {PAPER_BOUNDS[level][column][KS.index(k)]:.4f}")
            row += f"{ours + ref:>20}"
        lines.append(row)
    return "\n".join(lines)


def orderings(s: dict[str, Any], family: str, ks: list[int]) -> str:
    """UB / simple per heuristic beside the closest Archer Table 2 row."""
    cell = {(r["method"], r["k"]): r for r in s["orderings"] if r["family"] == family}
    lines = [f"\nUB / simple LB, {family} graphs: ours | Archer Table 2 (production models)",
             f"{'method':<11}" + "".join(f"{'k=' + str(k):>20}" for k in ks)]
    for method in s["methods"]:
        paper = PAPER_ORDERINGS.get(PAPER_METHOD.get(method, ""))
        row = f"{method:<11}"
        for k in ks:
            r = cell.get((method, k))
            ours = "-" if r is None or r["geomean"] is None else f"{r['geomean']:.3f}"
            ref = "" if paper is None or k not in KS else f" | {paper[KS.index(k)]:.3f}"
            row += f"{ours + ref:>20}"
        lines.append(row + (f"   (vs {PAPER_METHOD[method]})" if method in PAPER_METHOD else ""))
    return "\n".join(lines)


def times(s: dict[str, Any]) -> str:
    """Median seconds per level / heuristic and k (Fig. 4 in numbers)."""
    by: dict[tuple[str, int], list[float]] = {}
    for inst in s["instances"]:
        for group in ("levels", "methods"):
            for name, cell in inst[group].items():
                if cell["seconds"] is not None:
                    by.setdefault((name, inst["k"]), []).append(cell["seconds"])
    names = list(s["levels"]) + list(s["methods"])
    lines = ["\nmedian seconds per task (Fig. 4)", f"{'':<11}" + "".join(f"{'k=' + str(k):>10}" for k in s["ks"])]
    for name in names:
        vals = [sorted(by.get((name, k), [])) for k in s["ks"]]
        lines.append(f"{name:<11}" + "".join(f"{v[len(v) // 2]:>10.3f}" if v else f"{'-':>10}" for v in vals))
    return "\n".join(lines)


def best_proven(s: dict[str, Any], ks: list[int]) -> str:
    """Per k: the geometric mean over every graph of the best bound any level proved / best UB (0 counts as
    such a graph's ratio only when no level ran on it), beside Archer's exact row (Table 1), and per graph."""
    per: dict[int, list[tuple[str, float, str]]] = {}
    for inst in s["instances"]:
        ratio, by = 0.0, "-"
        for name in s["levels"]:  # hierarchy order: a tie goes to the cheaper level
            cell = inst["levels"].get(name)
            if cell is not None and cell["ratio"] is not None and cell["ratio"] > ratio:
                ratio, by = cell["ratio"], name
        per.setdefault(inst["k"], []).append((inst["graph"], ratio, by))
    exact = PAPER_BOUNDS["exact"][0]
    lines = ["\nbest proven bound / best UB over all levels, every graph (geometric mean) | Archer Table 1 exact",
             "".join(f"{'k=' + str(k):>22}" for k in ks),
             "".join(f"{_geomean([r for _, r, _ in per.get(k, [])]):>13.4f} | {exact[KS.index(k)]:.4f}" for k in ks)]
    for k in ks:
        lines.append(f"k={k}: " + ", ".join(f"{g} {r:.4f} ({by})" for g, r, by in sorted(per.get(k, []))))
    return "\n".join(lines)


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=list(KS), help="numbers of stages (default: 2..64)")
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds per task (default: 900)")
    ap.add_argument("--results", type=Path, help="SQLite store (default: bench_sweep-<limit>s.db in the temp dir)")
    ap.add_argument("--scheduler", help="Dask scheduler address (default: local processes)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local processes")
    ap.add_argument("--regal-only", action="store_true", help="skip the PipeDream profiles")
    ap.add_argument("--levels", nargs="+", default=list(LEVELS), help=f"levels (default: {' '.join(LEVELS)})")
    ap.add_argument("--methods", nargs="*", default=list(METHODS), help="heuristics (default: slicegraph brkga)")
    ap.add_argument("--testbed", help="a sweep testbed instead of the default (e.g. a list of files and zoo:NAME)")
    args = ap.parse_args()
    testbed = "zoo:" + ",zoo:".join(f"regal-{i}" for i in range(6))
    if not args.regal_only:
        testbed = f"{require(PROFILES)}," + testbed
    testbed = args.testbed or testbed
    results = args.results or Path(tempfile.gettempdir()) / f"bench_sweep-{args.time_limit:g}s.db"
    graphs = expand_testbed(testbed)
    check_graphs(graphs)
    tasks = plan(graphs, args.ks, args.levels, args.methods, args.time_limit)
    executor = DaskExecutor(args.scheduler) if args.scheduler else LocalExecutor(args.workers)
    print(f"{len(graphs)} graphs x {len(args.ks)} k x {len(args.levels) + len(args.methods)} = {len(tasks)} tasks, "
          f"{args.time_limit:g} s each; results in {results}", file=sys.stderr)
    with Store(results) as store:
        outcome = run_sweep(tasks, store, executor, progress=sys.stderr.isatty())
        s = summary(store)
    print(f"{outcome.ran} tasks run now ({len(outcome.failed)} failed), {outcome.stored_before} were stored; "
          f"{outcome.seconds:.0f} s; code {', '.join(s['code_versions'])}")
    for family in ("pipedream", "regal"):
        if family in s["families"]:
            print(table(s, family, sorted(args.ks)))
            print(orderings(s, family, sorted(args.ks)))
    print(times(s))
    print(best_proven(s, sorted(args.ks)))


if __name__ == "__main__":
    main()
