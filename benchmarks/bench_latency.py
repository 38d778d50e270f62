"""Tarnawski et al. (NeurIPS 2020), Table 4 baselines: ours vs the paper, single-sample latency.

    python benchmarks/bench_latency.py [--slow] [--time-limit 10] [--data ../shared/data/dnn-partitioning]

Columns: greedy; max-load DP on the input's cluster ("dp"), and on the fewest CPUs that keep
its optimal max-load ("dp-fewest", the reference code's tie-break); the human-expert split on
the 6 accelerators it uses. GNMT has more than 2M ideals, so its max-load split comes from the
linearized DP ("dpl", not the exact optimum). InceptionV3's DP takes minutes: only with --slow.
Then the latency heuristics next to the paper's IP: the latency local search ("lat-ls", from
greedy and the max-load DP split), latency-best ("lat-best": the best of greedy, DP, DPL and
the local search seeded with them) and latency-best among contiguous splits ("contig", the
IP's class), each with --time-limit seconds of search.
See docs/latency.md.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from common import DNN as DATA

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics import run
from placement_dsl.io import load_workload
from placement_dsl.io.dnn_partitioning import placement_from_split

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


def baselines(args: argparse.Namespace, row: dict[str, str], g, c, stem: str) -> str:
    """Table 4's baseline columns, ours next to the paper's: greedy, max-load DP, expert."""
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
    return (f"{fmt(gr, gr_ok):>9} {row['greedy']:>8} | {method:<4} {fmt(dp):>8} {fmt(fewest):>10} {cpus!s:>4} "
            f"{row['maxload_dp']:>8} | {fmt(ex, ex_ok):>9} {row['expert']:>16}")


SHORT = {"latency-local-search": "ls", "greedy": "greedy", "dp": "dp", "dpl": "dpl"}


def heuristics(args: argparse.Namespace, row: dict[str, str], g, c) -> str:
    """The latency heuristics next to the paper's IP: local search, latency-best (winner, subgraphs), and
    latency-best kept to contiguous splits (``max_subgraphs=1``, the IP's class)."""
    model, contiguous = CostModel.named("latency"), CostModel.named("latency", max_subgraphs=1)
    options = {"time_limit": args.time_limit, "seed": args.seed}
    ls = run("latency-local-search", g, c, model=model, **options)
    best = run("latency-best", g, c, model=model, **options)
    one = run("latency-best", g, c, model=contiguous, **options)
    ev, ev1 = evaluate(best.placement, model), evaluate(one.placement, contiguous)
    most = max(ev.subgraphs.values(), default=0)
    ip = float(row["ip_latency"])
    return (f"{fmt(ls.objective, evaluate(ls.placement, model).valid):>9} {fmt(best.objective, ev.valid):>9} "
            f"{SHORT[best.info['best']]:<6} {most:>4} {fmt(one.objective, ev1.valid):>9} {row['ip_latency']:>8} "
            f"{one.objective / ip - 1:>+7.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--slow", action="store_true", help="also run the exact DP on InceptionV3 (minutes)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per latency local search")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = list(csv.DictReader(line for line in (args.data / "paper_latency.csv").open() if not line.startswith("#")))
    head = (f"{'workload':<12} {'greedy':>9} {'paper':>8} | {'method':<4} {'dp':>8} {'dp-fewest':>10} {'cpus':>4} "
            f"{'paper':>8} | {'expert':>9} {'paper':>16} | {'lat-ls':>9} {'lat-best':>9} {'by':<6} {'subg':>4} "
            f"{'contig':>9} {'IP':>8} {'vs IP':>7}")
    print(head)
    print("-" * len(head))
    for row in rows:
        path = args.data / row["file"]
        stem = path.stem.replace("_inference", "")
        w = load_workload(path)
        print(f"{NAMES.get(stem, stem):<12} {baselines(args, row, w.graph, w.cluster, stem)} | "
              f"{heuristics(args, row, w.graph, w.cluster)}", flush=True)
    print("* = violates the memory constraint; by = latency-best's winner (ls = the latency local search); "
          "subg = most contiguous subgraphs on one accelerator in lat-best's split (1 = contiguous); "
          "contig = latency-best among contiguous splits (max_subgraphs=1), the class of the paper's IP; "
          "vs IP = contig against the IP (run to a 1% gap on BERT-3, BERT-24, GNMT)")


if __name__ == "__main__":
    main()
