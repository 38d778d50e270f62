"""Bound quality of the lower-bound hierarchy, next to Archer et al. (ICML 2024) Tables 1 and 3.

For every model of the testbed (PipeDream profiles and the zoo's REGAL graphs) and every
``k``, :func:`placement_dsl.certify.certify` runs each level with a per-level time limit;
each bound is divided by the best upper bound found (heuristics and the exact MIP's
incumbent; the paper divides by BRKGA's), and the table prints geometric means per level.

    python benchmarks/bench_bounds.py --quick            # k <= 8, a few models
    python benchmarks/bench_bounds.py --time-limit 900   # the full grid
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from common import SHARED_DATA, require

from placement_dsl import zoo
from placement_dsl.certify import certify
from placement_dsl.cli import resize
from placement_dsl.evaluate import CostModel
from placement_dsl.io import Workload, load_workload
from placement_dsl.presets import dag_problem

PROFILES = SHARED_DATA / "pipedream-profiles"
KS = (2, 4, 8, 16, 32, 64)
LEVELS = ("simple", "no-cut-io", "no-dag", "superblock", "guess", "exact")
# Archer et al. Table 1 (production models) and Table 3 (REGAL), k = 2..64
PAPER = {
    "simple": ((0.8340, 0.6627, 0.5236, 0.4598, 0.4435, 0.4401), (0.9579, 0.8795, 0.7911, 0.5821, 0.4087, 0.3336)),
    "superblock": ((0.9597, 0.7911, 0.6481, 0.5770, 0.5590, 0.5543), (0.9794, 0.8818, 0.7918, 0.5824, 0.4090, 0.3338)),
    "guess": ((0.9901, 0.8446, 0.6601, 0.5780, 0.5593, 0.5543), (0.9804, 0.8826, 0.7918, 0.5824, 0.4090, 0.3338)),
    "exact": ((0.9901, 0.9737, 0.9588, 0.9452, 0.8749, 0.7874), (0.9804, 0.9579, 0.9407, 0.8929, 0.5910, 0.3810)),
}


def testbed(quick: bool) -> list[tuple[str, Workload]]:
    names = ["alexnet", "vgg16", "resnet18", "gnmt"] if quick else sorted(
        p.stem for p in PROFILES.glob("*.txt") if p.stem != "LICENSE")
    out = [(n, load_workload(require(PROFILES) / f"{n}.txt")) for n in names]
    regal = ["regal-1"] if quick else [f"regal-{i}" for i in range(6)]
    return out + [(n, zoo.get(n)) for n in regal]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-12)) for x in xs) / len(xs)) if xs else float("nan")


def run(quick: bool, time_limit: float, workers: int, out: Path | None) -> dict[tuple[str, int], list[float]]:
    ks = [k for k in KS if k <= 8] if quick else list(KS)
    ratios: dict[tuple[str, int], list[float]] = {}
    for name, w in testbed(quick):
        for k in ks:
            problem = dag_problem(Workload(w.graph, resize(w.cluster, k), w.format, w.meta),
                                  CostModel.named("bottleneck"))
            cert = certify(problem, budget=time_limit * len(LEVELS), levels=LEVELS, gap=0.0, workers=workers,
                           stop_at_gap=False)
            # a level that proved nothing (skipped, no bound) is left out, not counted as 0
            row = {r.level: r.bound / cert.objective for r in cert.levels if r.bound is not None}
            for level, ratio in row.items():
                ratios.setdefault((level, k), []).append(ratio)
            line = {"model": name, "k": k, "ub": cert.objective, "ub_by": cert.found_by, **row,
                    "status": {r.level: r.status.value for r in cert.levels}}
            print(json.dumps(line), file=sys.stderr, flush=True)
            if out:
                with out.open("a") as f:
                    f.write(json.dumps(line) + "\n")
    return ratios


def table(ratios: dict[tuple[str, int], list[float]]) -> str:
    ks = sorted({k for _, k in ratios})
    head = f"{'level':<11}" + "".join(f"{'k=' + str(k):>9}" for k in ks) + "   | Archer T1 / T3"
    rows = [head]
    for level in LEVELS:
        ours = "".join(f"{geomean(ratios.get((level, k), [])):>9.4f}" for k in ks)
        paper = PAPER.get(level)
        ref = "" if paper is None else "   | " + " ".join(
            f"{paper[0][KS.index(k)]:.3f}/{paper[1][KS.index(k)]:.3f}" for k in ks)
        rows.append(f"{level:<11}{ours}{ref}")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="k <= 8 and five models")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per level (quick: 3, full: 900)")
    ap.add_argument("--workers", type=int, default=1, help="processes for the guess level")
    ap.add_argument("--out", type=Path, help="append one JSON line per (model, k)")
    args = ap.parse_args()
    limit = args.time_limit or (3.0 if args.quick else 900.0)
    print(table(run(args.quick, limit, args.workers, args.out)))


if __name__ == "__main__":
    main()
