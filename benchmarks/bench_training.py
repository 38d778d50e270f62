"""Training pipelines: our pipeline planner vs PipeDream's, the simulator vs the analytic objectives,
and GPipe- vs PipeDream-optimal splits (Tarnawski App. A).

Tables (markdown):

1. **Planners** — the PipeDream profiles on 4, 8 and 16 accelerators in 2 servers
   (:meth:`Cluster.hierarchical`, ``--intra``/``--inter`` bytes per ms; 16 GiB each): PipeDream's
   hierarchical planner (:mod:`placement_dsl.heuristics.pipedream_planner`; its own estimate, then
   the cost model's score of its configuration) next to our pipeline planner
   (:mod:`placement_dsl.heuristics.pipeline_dp`) under the same cost model (PipeDream's
   ``max (FW + BW)``, replication and routes as :mod:`placement_dsl.replication` prices them).
   ``proven`` says the DP's value is the cost model's and its bound certifies optimality over its
   class (pipelines along the DFS order with replicated stages and server segments), which
   contains PipeDream's configuration.
2. **Simulator** — every training workload of ``../shared/data`` (PipeDream profiles and the
   dnn-partitioning ``*training*`` inputs) on 4 accelerators: flat, flat with replication, and 2
   servers x 2 with replication; the simulator's time per sample for ``m`` micro-batches against
   the analytic objective (1F1B: ``max (FW + BW)``; GPipe: ``max FW + max BW``), relative gaps
   (1F1B also with one micro-batch more in PipeDream's warm-up: the strict one-forward-one-backward
   steady state reaches ``max (FW + BW)`` at the depth already, so it changes only the fill); ``fill`` is the largest gap between GPipe's
   fill-and-drain time for finite ``m`` (:func:`placement_dsl.training.gpipe_time_per_sample`) and the
   simulator over ``m`` in 1, 4, 16, 64 (exact: round-off only).
3. **GPipe vs PipeDream** — on 4 flat accelerators, the PipeDream-optimal split (pipeline planner,
   no replication) and the GPipe-optimal split (:mod:`placement_dsl.heuristics.gpipe_split`), both
   exact along the same order, each scored under both objectives.
4. **Planners with memory** — table 1 with 1F1B memory per schedule (Adam: 16 bytes per parameter
   over the profiles' 4-byte weights; stage ``s`` of ``k`` stashes ``k - s`` micro-batches):
   PipeDream's planner ignores memory, ours counts it exactly (DenseNet-121 on 16 devices takes
   about two minutes: the DP then tracks the stages to the end).

5. **Certificates with replicas** — the small PipeDream profiles on 4 flat accelerators with
   ``Contiguous`` and ``Replicate(4)`` (App. C.2): :func:`placement_dsl.certify.certify`'s levels that
   bound replicated placements — Lemma 3.3 with replicas (all placements), the DP over ideals with
   replicas (exact over the DP class), ``throughput-replicated``'s dual bound (contiguous class,
   ``--ip-seconds``) — and the gap of the best placement over the contiguous class.

    python benchmarks/bench_training.py            # every table
    python benchmarks/bench_training.py --quick    # small models only
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import DNN, SHARED_DATA, fmt, markdown_head, markdown_row, require

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics.gpipe_split import gpipe_split
from placement_dsl.heuristics.pipedream_planner import pipedream_planner
from placement_dsl.heuristics.pipeline import pipeline
from placement_dsl.io import Workload, load_workload, pipedream
from placement_dsl.simulate import analytic_time_per_sample, simulate
from placement_dsl.training import TrainingMemorySpec

PROFILES = SHARED_DATA / "pipedream-profiles"
MEMORY = 16 * 2**30
QUICK = ("alexnet", "vgg16", "resnet18", "gnmt")


def profiles(quick: bool) -> list[Path]:
    paths = sorted(p for p in require(PROFILES).glob("*.txt") if p.stem != "LICENSE")
    return [p for p in paths if p.stem in QUICK] if quick else paths


def training_workloads(quick: bool) -> list[tuple[str, Workload]]:
    """Every training workload of the shared data, on its accelerators (host CPUs dropped)."""
    out = [(p.stem, pipedream.load(p, stages=4, training=True)) for p in profiles(quick)]
    for path in sorted(require(DNN / "throughput-inputs").glob("*/*training*.json")):
        if quick and path.stem not in ("bert24_training", "gnmt_training"):
            continue
        w = load_workload(path)
        accs = [d for d in w.cluster.devices if not d.host]
        out.append((path.stem, Workload(w.graph, Cluster(accs), w.format, w.meta)))
    return out


def config(placement) -> str:
    """Stages as replica counts in pipeline order, e.g. ``4+2+2``."""
    used = sorted(set(placement.assign.tolist()))
    return "+".join(str(int(placement.replicas[d])) for d in used)


# ---------------------------------------------------------------------------- table 1
def planners(args: argparse.Namespace) -> None:
    model = CostModel.named("pipedream")
    print(f"\n### Planners: 2 servers, intra {args.intra:g} B/ms, inter {args.inter:g} B/ms, 16 GiB per device\n")
    markdown_head(["model", "devices", "PipeDream estimate", "PipeDream (cost model)", "ours", "ours/PipeDream",
                   "proven", "ours: replicas per stage", "PipeDream: replicas", "s PipeDream", "s ours"])
    for path in profiles(args.quick):
        w = pipedream.load(path, stages=4, training=True)
        for per in (2, 4, 8):
            c = Cluster.hierarchical(2, per, intra=args.intra, inter=args.inter, memory=MEMORY)
            t = time.perf_counter()
            theirs = pipedream_planner(w.graph, c, model=model, replication=True)
            t1 = time.perf_counter()
            ours = pipeline(w.graph, c, model=model, replication=True,
                            upper_bound=evaluate(theirs.placement, model).objective)
            t2 = time.perf_counter()
            proven = ours.bound == ours.objective and abs(ours.info["dp_value"] - ours.objective) <= 1e-9 * ours.objective
            markdown_row([path.stem, 2 * per, fmt(theirs.info["planner_estimate"]), fmt(theirs.objective),
                          fmt(ours.objective), fmt(ours.objective / theirs.objective, ".3f"), "yes" if proven else "NO",
                          config(ours.placement), config(theirs.placement), fmt(t1 - t, ".1f"), fmt(t2 - t1, ".1f")])


def planners_with_memory(args: argparse.Namespace) -> None:
    spec = TrainingMemorySpec("1f1b", weight_bytes=4.0)  # Adam, 16 bytes per fp32 parameter of the profiles
    model = CostModel.named("pipedream", training_memory=spec)
    print("\n### Planners with 1F1B memory (Adam: 16 bytes per parameter of the fp32 profiles, k - s micro-batches "
          "stashed), 2 servers\n")
    markdown_head(["model", "devices", "PipeDream (cost model)", "PipeDream valid", "ours", "ours valid", "proven",
                   "ours: replicas per stage", "s ours"])
    for path in profiles(args.quick):
        w = pipedream.load(path, stages=4, training=True)
        for per in (2, 4, 8):
            c = Cluster.hierarchical(2, per, intra=args.intra, inter=args.inter, memory=MEMORY)
            theirs = pipedream_planner(w.graph, c, model=model, replication=True)
            t = time.perf_counter()
            ours = pipeline(w.graph, c, model=model, replication=True)
            valid = evaluate(ours.placement, model).valid
            markdown_row([path.stem, 2 * per, fmt(theirs.objective), "yes" if evaluate(theirs.placement, model).valid
                          else "NO", fmt(ours.objective), "yes" if valid else "NO",
                          "yes" if ours.bound == ours.objective else "NO", config(ours.placement),
                          fmt(time.perf_counter() - t, ".1f")])


# ---------------------------------------------------------------------------- table 2
CASES = {"flat": (False, None), "replicated": (True, None), "2x2 servers": (True, (2, 2))}


def simulator(args: argparse.Namespace) -> None:
    print("\n### Simulator vs analytic time per sample (4 accelerators)\n")
    ms = (16, 64, 256)
    markdown_head(["workload", "case", "schedule", "analytic", *[f"gap m={m}" for m in ms], "gap m=256, +1 in flight",
                   "fill (finite m)"])
    model = CostModel.named("pipedream")
    for name, w in training_workloads(args.quick):
        for case, (replicate, servers) in CASES.items():
            d = w.cluster.devices[0]
            cluster = w.cluster if servers is None else Cluster.hierarchical(
                *servers, intra=d.bandwidth, inter=d.bandwidth / 10, memory=d.memory, kind=d.kind)
            cluster = cluster if servers else Cluster([x.model_copy(update={"name": f"acc{i}"})
                                                       for i, x in enumerate(cluster.devices[:4])])
            p = pipeline(w.graph, cluster, model=model, replication=replicate).placement
            for schedule in ("1f1b", "gpipe"):
                want = analytic_time_per_sample(p, schedule)
                gaps = [simulate(p, schedule, m).time_per_sample / want - 1 for m in ms]
                more = simulate(p, schedule, ms[-1], extra_in_flight=1).time_per_sample / want - 1 \
                    if schedule == "1f1b" else None
                fill = max(abs(analytic_time_per_sample(p, "gpipe", microbatches=m)
                               / simulate(p, "gpipe", m).time_per_sample - 1) for m in (1, 4, 16, 64)) \
                    if schedule == "gpipe" else None
                markdown_row([name, case, schedule, fmt(want, ".4g"), *[fmt(100 * g, ".2f") + " %" for g in gaps],
                              "—" if more is None else fmt(100 * more, ".2f") + " %",
                              "—" if fill is None else fmt(fill, ".1e")])


# ---------------------------------------------------------------------------- table 5
def certificates_with_replicas(args: argparse.Namespace) -> None:
    from placement_dsl.certify import certify
    from placement_dsl.constraints import Contiguous
    from placement_dsl.objectives import PipeDream
    from placement_dsl.problem import Problem
    from placement_dsl.training_terms import Replicate

    print(f"\n### Certificates with replicas (4 flat accelerators, Contiguous, Replicate(4), IP {args.ip_seconds:g} s)\n")
    markdown_head(["model", "best", "found by", "simple", "dp (DP class)", "throughput-replicated", "gap (contiguous)",
                   "s"])
    for path in profiles(True):
        w = pipedream.load(path, stages=4, training=True)
        cluster = Cluster([x.model_copy(update={"name": f"acc{i}"}) for i, x in enumerate(w.cluster.devices[:4])])
        problem = Problem(w.graph, cluster, PipeDream(), [Contiguous(), Replicate(4)])
        t = time.perf_counter()
        cert = certify(problem, budget=args.ip_seconds + 30, levels=("simple", "dp", "throughput"), gap=0.0,
                       stop_at_gap=False)
        bounds = {r.level: "—" if r.bound is None else fmt(r.bound) for r in cert.levels}
        markdown_row([path.stem, fmt(cert.objective), cert.found_by, bounds["simple"], bounds["dp"],
                      bounds["throughput"], fmt(100 * cert.gap, ".2f") + " %", fmt(time.perf_counter() - t, ".1f")])


# ---------------------------------------------------------------------------- table 3
def gpipe_vs_pipedream(args: argparse.Namespace) -> None:
    print("\n### GPipe- vs PipeDream-optimal splits (4 flat accelerators; Tarnawski App. A)\n")
    markdown_head(["workload", "PD split: PD obj", "PD split: GPipe obj", "GPipe split: PD obj",
                   "GPipe split: GPipe obj", "GPipe obj: PD split / GPipe split"])
    pd_model, gp_model = CostModel.named("pipedream"), CostModel.named("gpipe")
    for name, w in training_workloads(args.quick):
        cluster = Cluster([x.model_copy(update={"name": f"acc{i}"}) for i, x in enumerate(w.cluster.devices[:4])])
        pd = pipeline(w.graph, cluster, model=pd_model, replication=False).placement
        gp = gpipe_split(w.graph, cluster, model=gp_model).placement
        a, b = evaluate(pd, gp_model).objective, evaluate(gp, gp_model).objective
        markdown_row([name, fmt(evaluate(pd, pd_model).objective, ".4g"), fmt(a, ".4g"),
                      fmt(evaluate(gp, pd_model).objective, ".4g"), fmt(b, ".4g"), fmt(100 * (a / b - 1), "+.2f") + " %"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models only")
    ap.add_argument("--intra", type=float, default=12.5e6, help="bytes per ms inside a server (default 100 Gbit/s)")
    ap.add_argument("--inter", type=float, default=1.25e6, help="bytes per ms between servers (default 10 Gbit/s)")
    ap.add_argument("--tables", default="1,2,3,4,5", help="which tables (default 1,2,3,4,5)")
    ap.add_argument("--ip-seconds", type=float, default=30.0, help="table 5: the replicated IP's time limit")
    args = ap.parse_args()
    chosen = set(args.tables.split(","))
    for key, table in (("1", planners), ("2", simulator), ("3", gpipe_vs_pipedream), ("4", planners_with_memory),
                       ("5", certificates_with_replicas)):
        if key in chosen:
            table(args)


if __name__ == "__main__":
    main()
