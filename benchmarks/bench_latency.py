"""Tarnawski et al. (NeurIPS 2020), Table 4 baselines: ours vs the paper, single-sample latency.

    python benchmarks/bench_latency.py [--slow] [--data ../shared/data/dnn-partitioning]

Columns: greedy; max-load DP on the input's cluster ("dp"), and on the fewest CPUs that keep
its optimal max-load ("dp-fewest", the reference code's tie-break); the human-expert split on
the 6 accelerators it uses. GNMT has more than 2M ideals, so its max-load split comes from the
linearized DP ("dpl", not the exact optimum). InceptionV3's DP takes minutes: only with --slow.
See docs/latency.md.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics import run
from placement_dsl.io import load_workload
from placement_dsl.io.dnn_partitioning import placement_from_split

from common import DNN as DATA
NAMES = {"bert_l-3": "BERT-3 (op)", "bert24": "BERT-24", "resnet50": "ResNet50", "inceptionv3": "InceptionV3",
         "gnmt": "GNMT"}


def with_cpus(cluster: Cluster, cpus: int, accelerators: int | None = None) -> Cluster:
    k = int((~cluster.host).sum()) if accelerators is None else accelerators
    return Cluster.accelerators(k, memory=float(cluster.memory[~cluster.host][0]), cpus=cpus)


def latency(placement) -> tuple[float, bool]:
    ev = evaluate(placement, "latency")
    return ev.objective, ev.valid


def maxload(method, graph, cluster):
    model = CostModel.named("throughput")
    full = run(method, graph, cluster, model=model)
    for cpus in range(int(cluster.host.sum()) + 1):
        r = run(method, graph, with_cpus(cluster, cpus), model=model)
        if r.objective <= full.objective * (1 + 1e-9):
            return full, r, cpus
    return full, full, int(cluster.host.sum())


def fmt(x: float | None, valid: bool = True) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.2f}" + ("" if valid else "*")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--slow", action="store_true", help="also run the exact DP on InceptionV3 (minutes)")
    args = ap.parse_args()
    rows = list(csv.DictReader(line for line in (args.data / "paper_latency.csv").open() if not line.startswith("#")))
    head = f"{'workload':<12} {'greedy':>9} {'paper':>8} | {'method':<4} {'dp':>8} {'dp-fewest':>10} {'cpus':>4} {'paper':>8} | {'expert':>9} {'paper':>16}"
    print(head)
    print("-" * len(head))
    for row in rows:
        path = args.data / row["file"]
        stem = path.stem.replace("_inference", "")
        w = load_workload(path)
        g, c = w.graph, w.cluster
        gr, gr_ok = latency(run("greedy", g, c, model=CostModel.named("latency")).placement)
        method = "dpl" if stem == "gnmt" else "dp"
        if stem == "inceptionv3" and not args.slow:
            dp = fewest = None
            cpus = "-"
        else:
            full, few, cpus = maxload(method, g, c)
            dp, fewest = latency(full.placement)[0], latency(few.placement)[0]
        expert_file = args.data / "human-experts" / f"{stem}_inference_expert.json"
        ex, ex_ok = None, True
        if expert_file.exists():
            split = json.loads(expert_file.read_text())
            k = sum(1 for d in split["fpgas"] if d["nodes"])
            cl = with_cpus(c, int(c.host.sum()), max(k, int((~c.host).sum())))
            ex, ex_ok = latency(placement_from_split(g, cl, split))
        print(f"{NAMES.get(stem, stem):<12} {fmt(gr, gr_ok):>9} {row['greedy']:>8} | {method:<4} {fmt(dp):>8} "
              f"{fmt(fewest):>10} {cpus!s:>4} {row['maxload_dp']:>8} | {fmt(ex, ex_ok):>9} {row['expert']:>16}",
              flush=True)
    print("* = violates the memory constraint")


if __name__ == "__main__":
    main()
