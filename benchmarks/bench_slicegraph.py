"""SliceGraph orderings on the PipeDream profiles: UB / simple lower bound, like Archer et al. Table 2.

For every profile in ../shared/data/pipedream-profiles and k in {2, 4, 8, 16, 32, 64}, run
slicegraph (the profile's own topological order), random-T, brkga and mla / mla-weighted with
``--evaluations`` candidate orders each, and report the geometric mean over the models of
``objective / simple_lower_bound`` (Archer Lemma 3.3) next to the paper's Table 2 (which is
over Google's production models, so only the trend is comparable), and evaluations per second.
Then slice the training layer graphs of Tarnawski et al. (their forward projection, App. B)
with slicegraph and pipedream next to their DP optimum (Tarnawski Table 1), and time BRKGA with
10,000 evaluations on a 1,000-op REGAL-style graph with k = 16.

Workload mapping (placement_dsl.io.pipedream.load): work = forward_compute_time (ms),
out_bytes = activation_size, param_bytes = parameter_size; cost model 'bottleneck' (Archer's
MTPP with parameter overflow). Assumed: bandwidth 12.5e6 bytes/ms (100 Gbit/s) and 16 GiB of
fast memory per stage unless --bandwidth / --memory say otherwise.

    python benchmarks/bench_slicegraph.py [--quick] [--evaluations N] [--ks 2 4 64]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from common import SHARED_DATA as DATA

from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics import run
from placement_dsl.io import load_workload
from placement_dsl.io.pipedream import DEFAULT_BANDWIDTH, DEFAULT_MEMORY, load
from placement_dsl.zoo import regal

PROFILES = DATA / "pipedream-profiles"
LAYER_GRAPHS = DATA / "dnn-partitioning" / "throughput-inputs" / "LayerGraphs"
TRAINING_DP = {"bert24": 41.75, "resnet50": 78.63, "gnmt": 107.00, "inceptionv3": 122.76}  # Tarnawski Table 1, DP TPS
KS = (2, 4, 8, 16, 32, 64)
METHODS = ("slicegraph", "random", "brkga", "mla", "mla-weighted")
# Archer et al. Table 2 (production models): rows we have a method for
PAPER = {
    "mla": (1.216, 1.538, 1.950, 2.224, 2.304, 2.326),
    "mla-weighted": (1.206, 1.516, 1.920, 2.182, 2.258, 2.283),
    "random-1": (1.220, 1.551, 1.959, 2.230, 2.309, 2.333),
    "random-100": (1.201, 1.512, 1.916, 2.179, 2.258, 2.282),
    "random-10000": (1.199, 1.509, 1.911, 2.176, 2.256, 2.281),
    "brkga-100": (1.201, 1.516, 1.919, 2.184, 2.263, 2.288),
    "brkga-10000": (1.199, 1.509, 1.910, 2.175, 2.255, 2.272),
}


def geomean(values: list[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else math.nan


def table2(paths: list[Path], ks: tuple[int, ...], evaluations: int, bandwidth: float, memory: float) -> None:
    model = CostModel.named("bottleneck")
    ratios: dict[tuple[str, int], list[float]] = {}
    rates: dict[str, list[float]] = {}
    for path in paths:
        for k in ks:
            w = load(path, stages=k, bandwidth=bandwidth, memory=memory)
            lb = simple_lower_bound(w.graph, w.cluster)
            for method in METHODS:
                opts = {} if method == "slicegraph" else {"evaluations": evaluations}
                r = run(method, w.graph, w.cluster, model=model, seed=0, **opts)
                ratios.setdefault((method, k), []).append(r.objective / lb)
                rates.setdefault(method, []).append(r.evaluations / max(r.seconds, 1e-9))
        print(f"  done {path.stem} (n={w.graph.n})", file=sys.stderr)
    head = f"{'method':<18}" + "".join(f"{f'k={k}':>8}" for k in ks)
    print(f"\nUB / simple LB, geometric mean over {len(paths)} PipeDream profiles ({evaluations} evaluations)")
    print(head + f"{'evals/s':>10}")
    for method in METHODS:
        name = method if method in ("slicegraph", "mla", "mla-weighted") else f"{method}-{evaluations}"
        row = "".join(f"{geomean(ratios.get((method, k), [])):>8.3f}" for k in ks)
        print(f"{name:<18}{row}{np.median(rates[method]):>10.0f}")
    print("\nArcher et al. Table 2 (production models; same ratio)")
    for name, vals in PAPER.items():
        print(f"{name:<18}" + "".join(f"{vals[KS.index(k)]:>8.3f}" if k in KS else f"{'-':>8}" for k in ks))


def training() -> None:
    """Slicing the forward projection of Tarnawski's training layer graphs vs their DP optimum."""
    print("\nTraining layer graphs (Tarnawski Table 1 setting): max load, and / DP optimum")
    print(f"{'model':<12}{'n':>6}{'dp':>9}{'slicegraph':>12}{'ratio':>8}{'pipedream':>11}{'ratio':>8}")
    for name, dp in TRAINING_DP.items():
        w = load_workload(LAYER_GRAPHS / f"{name}_training.json")
        sg, pd = (run(m, w.graph, w.cluster).objective for m in ("slicegraph", "pipedream"))
        print(f"{name:<12}{w.graph.n:>6}{dp:>9.2f}{sg:>12.2f}{sg / dp:>8.3f}{pd:>11.2f}{pd / dp:>8.3f}")


def brkga_timing(evaluations: int) -> None:
    w = regal(seed=1, n=1000, stages=16)
    model = CostModel.named("bottleneck")
    run("brkga", w.graph, w.cluster, model=model, seed=0, evaluations=10)  # compile / load the kernels
    r = run("brkga", w.graph, w.cluster, model=model, seed=0, evaluations=evaluations)
    lb = simple_lower_bound(w.graph, w.cluster)
    base = run("slicegraph", w.graph, w.cluster, model=model)
    print(f"\nBRKGA on a REGAL-style DAG (n={w.graph.n}, m={w.graph.m}), k=16: {r.evaluations} evaluations in "
          f"{r.seconds:.1f} s ({r.evaluations / r.seconds:.0f}/s); UB/LB {r.objective / lb:.3f} "
          f"(slicegraph on the generator's order {base.objective / lb:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 models, k <= 16, 100 evaluations, 2,000 in the timing")
    parser.add_argument("--evaluations", type=int, default=1000)
    parser.add_argument("--bandwidth", type=float, default=DEFAULT_BANDWIDTH, help="bytes per ms")
    parser.add_argument("--memory", type=float, default=DEFAULT_MEMORY, help="bytes of fast memory per stage")
    parser.add_argument("--ks", type=int, nargs="+", help="numbers of stages (default: 2..64, with --quick 2..16)")
    args = parser.parse_args()
    if not PROFILES.is_dir():
        print(f"shared data missing: {PROFILES} not found; skipping the profile table")
    else:
        paths = sorted(PROFILES.glob("*.txt"))
        paths = [p for p in paths if p.stem != "LICENSE"]
        ks, evals = KS, args.evaluations
        if args.quick:
            paths = [p for p in paths if p.stem in ("alexnet", "resnet18", "vgg16")]
            ks, evals = (2, 4, 8, 16), 100
        ks = tuple(args.ks) if args.ks else ks
        print(f"bandwidth {args.bandwidth:.4g} bytes/ms, memory {args.memory:.4g} bytes per stage, "
              f"cost model 'bottleneck'")
        start = time.perf_counter()
        table2(paths, ks, evals, args.bandwidth, args.memory)
        print(f"({time.perf_counter() - start:.0f} s)")
    if LAYER_GRAPHS.is_dir():
        training()
    brkga_timing(2000 if args.quick else 10_000)


if __name__ == "__main__":
    main()
