"""Interleaved 1F1B, ZB-H1 and ZBV: the analytic figures against the event simulator at m micro-batches.

For each zoo training model, ``p`` ranks of the model's accelerators and ``v`` virtual stages per
rank: the forward ops in topological order cut into ``p v`` parts of equal work (each gradient
with its op), part ``s`` on rank ``s mod p``; for ZBV (``zbv``, two stages per rank in a V) part
``s`` on a device of its own (copies of the first accelerator), which the V's rank map folds onto
the ``p`` ranks. Then on random stage times (uniform, several seeds).
Each row: the simulator's time per sample (:func:`placement_dsl.simulate.simulate`), the exact
recurrence of the rank orders (``analytic_time_per_sample``), the fill-work-drain closed form
(``closed_form_time_per_sample``) and the steady state (``m -> inf``), with their relative errors
against the simulator; the last lines give the largest error per schedule.

    python benchmarks/bench_schedules.py            # m = 64, every training model of the zoo, 20 seeds
    python benchmarks/bench_schedules.py --quick    # three models, 5 seeds
    python benchmarks/bench_schedules.py --links 0.5  # the zoo rows with links between the devices (--ring)
    python benchmarks/bench_schedules.py --random-links 3  # the closed form on generated pipelines with links
    python benchmarks/bench_schedules.py --splits --quick  # our v-splits against Megatron's even layout and v = 1
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from placement_dsl import order_bounds, zoo
from placement_dsl.cluster import Cluster, Link
from placement_dsl.errors import SpecError
from placement_dsl.order_bounds import closed_form_makespan
from placement_dsl.pipeline_orders import (
    FOLDS,
    StageTimes,
    StageTransfer,
    TaskGraph,
    layout,
    order_makespan,
    rank_orders,
)
from placement_dsl.placement import Placement
from placement_dsl.simulate import analytic_time_per_sample, closed_form_time_per_sample, simulate
from placement_dsl.stage_schedules import simulate_orders

CASES = (("interleaved-1f1b", 2, 1), ("interleaved-1f1b", 2, 2), ("interleaved-1f1b", 4, 2),
         ("interleaved-1f1b", 4, 3), ("zb-h1", 2, 1), ("zb-h1", 4, 1), ("zb-h1", 4, 2), ("zbv", 2, 2), ("zbv", 4, 2))


def round_robin(workload, p: int, v: int, schedule: str = "interleaved-1f1b", links: float | None = None,
                ring: bool = False) -> Placement:
    """The forward ops cut into ``p v`` parts of equal work in topological order, part ``s`` on rank ``s mod p``
    (ZBV: on device ``s`` of ``2p``, folded onto the ranks by the schedule). ``links``: a link of ``links`` times
    the devices' bandwidth from each device to each other one, or with ``ring`` to the next one only (a one-way
    ring: a message to the device before goes the long way round, over links other messages hold)."""
    g = workload.graph
    accelerators = [d for d in workload.cluster.devices if not workload.cluster.host[workload.cluster.index[d.name]]]
    folds = schedule in FOLDS
    devices = [accelerators[0].model_copy(update={"name": f"{accelerators[0].name}/{k}"})
               for k in range(p * v)] if folds else list(accelerators[:p])
    pairs = zip(devices, devices[1:] + devices[:1]) if ring else ((a, b) for a in devices for b in devices)
    cluster = Cluster(devices, [] if links is None else [Link(src=a.name, dst=b.name, bandwidth=links * a.bandwidth)
                                                         for a, b in pairs if a is not b])
    fw = [int(u) for u in g.topo if not g.backward[u]]
    work = np.nan_to_num(g.work(accelerators[0].kind)[fw], posinf=0.0)
    cut = np.minimum((np.cumsum(work) - work / 2) / max(work.sum(), 1e-300) * p * v, p * v - 1).astype(int)
    part = np.zeros(g.n, dtype=np.int64)
    part[fw] = cut
    for grp in g.groups:
        ahead = [u for u in grp if not g.backward[u]]
        part[[u for u in grp if g.backward[u]]] = part[ahead[0]] if ahead else 0
    return Placement(g, cluster, part if folds else part % p)


def error(value: float, reference: float) -> float:
    return abs(value - reference) / reference if reference else 0.0


def models(quick: bool, m: int, links: float | None = None, ring: bool = False) -> list[tuple]:
    names = ["gpt2-medium-layers-train", "resnet50-train", "bert-base-layers-train"] if quick else \
        [n for n in zoo.names() if n.endswith("-train") and not n.startswith("regal")]
    rows = []
    for name in names:
        w = zoo.get(name)
        for schedule, p, v in CASES:
            try:
                pl = round_robin(w, p, v, schedule, links, ring)
                sim = simulate(pl, schedule, m).time_per_sample
            except SpecError as err:
                rows.append((name, schedule, p, v, None, None, None, None, str(err)))
                continue
            rows.append((name, schedule, p, v, sim, analytic_time_per_sample(pl, schedule, microbatches=m),
                         closed_form_time_per_sample(pl, schedule, m), analytic_time_per_sample(pl, schedule), ""))
    return rows


def random_rows(seeds: int, m: int) -> list[tuple]:
    rows = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        for schedule, p, v in CASES:
            s = p * v
            t = StageTimes(tuple(layout(schedule, p, s)), *(tuple(rng.uniform(lo, 2.0, s)) for lo in (0.5, 0.5, 0.2)))
            orders = rank_orders(schedule, p, v, m)
            sim = simulate_orders(t, orders).makespan / m
            steady = float(np.bincount(t.rank, weights=np.add(np.add(t.f, t.i), t.w)).max())
            rows.append((f"random seed {seed}", schedule, p, v, sim, order_makespan(t, orders) / m,
                         closed_form_makespan(t, orders) / m, steady, ""))
    return rows


FAMILIES = ("pairs", "pairs + latency", "private + latency", "ring + latency")  # the links of linked_times


def linked_times(rng, schedule: str, p: int, v: int, scale: float, family: str = "pairs") -> StageTimes:
    """Random stage times (F, I, W uniform in [0.5, 2], [0.5, 2], [0.2, 2]; interleaved 1F1B's B is I + W) whose
    boundaries between ranks send one message each way: the forward message up to ``scale`` times its sender's F,
    the backward one up to ``scale`` times its sender's I, over the links of ``family`` (:data:`FAMILIES`):
    ``pairs`` a link per ordered pair of ranks (the boundaries of the virtual stages between two ranks share it);
    ``private`` a link per message; ``ring`` a one-way ring of ``p`` links, each message hop by hop from its
    sender's rank to its reader's (a link carries several ranks' messages), each link of a random bandwidth (0.5-2
    times); ``+ latency`` each link a random latency up to the mean task time."""
    s = p * v
    rank = tuple(layout(schedule, p, s))
    f, i, w = rng.uniform(0.5, 2.0, s), rng.uniform(0.5, 2.0, s), rng.uniform(0.2, 2.0, s)
    if schedule == "interleaved-1f1b":
        i, w = i + w, np.zeros(s)
    sizes = []
    for a in range(s - 1):
        if rank[a] != rank[a + 1]:
            sizes.append((a, a + 1, "F", rng.uniform(0, scale) * f[a]))
            sizes.append((a + 1, a, "B", rng.uniform(0, scale) * i[a + 1]))
    kind = family.split(" + ")[0]
    speed, lag = rng.uniform(0.5, 2.0, 2 * len(sizes) + p), rng.uniform(0.0, 1.0, 2 * len(sizes) + p)
    link: dict[object, int] = {}
    sent = []
    for n, (src, dst, kind_of, size) in enumerate(sizes):
        x, y = rank[src], rank[dst]
        if kind == "ring":
            path = [(x + h) % p for h in range((y - x) % p)]
        else:
            path = [n if kind == "private" else (x, y)]
        lks = tuple(link.setdefault(key, len(link)) for key in path)
        hops = tuple(size / speed[k] for k in lks) if kind == "ring" else (size,) * len(lks)
        lat = tuple(float(lag[k]) for k in lks) if family.endswith("latency") else ()
        sent.append(StageTransfer(src, dst, kind_of, kind_of, lks, hops, lat))
    return StageTimes(rank, tuple(f), tuple(i), tuple(w), tuple(sent))


def random_links(seeds: int) -> None:
    """The closed form against the recurrence (which the simulator equals) on generated pipelines with links: p 2..8
    ranks, v 1..4 virtual stages (ZBV's 2), m 8, 32, 64, messages 0..2x their stages' times (scales 0, 0.5, 1, 2),
    each family of links of :func:`linked_times`; the largest relative error per family, schedule and m, the former
    closed form's there (its last family each message a delay, no link shared) and its own largest, and each part's
    error on the worst instance."""
    worst: dict[tuple[str, str, int], tuple] = {}
    before: dict[tuple[str, str, int], float] = {}
    for family in FAMILIES:
        for schedule in ("interleaved-1f1b", "zb-h1", "zbv"):
            for p in (2, 3, 4, 6, 8):
                for v in (2,) if schedule in FOLDS else (1, 2, 3, 4):
                    for m in (8, 32, 64):
                        if schedule not in FOLDS and m % max(1, m // p):
                            continue
                        orders = rank_orders(schedule, p, v, m)
                        for seed in range(seeds):
                            for scale in (0.0, 0.5, 1.0, 2.0):
                                t = linked_times(np.random.default_rng([seed, p, v]), schedule, p, v, scale, family)
                                exact = order_makespan(t, orders)
                                tasks = TaskGraph(t, orders)
                                alone = max(tasks.longest([*tasks.ranks, *([h] for h in tasks.hops)])[1].values(),
                                            default=0.0)  # the former last family: each message a delay
                                parts = (closed_form_makespan(t, orders), order_bounds.fill_work_drain(t, orders),
                                         order_bounds.links(tasks), order_bounds.queued(tasks))
                                old = max(*parts[1:3], alone)
                                assert parts[0] <= exact * (1 + 1e-12), (family, schedule, p, v, m, seed, scale)
                                errs = tuple(error(x, exact) for x in (parts[0], old, *parts[1:]))
                                key = (family, schedule, m)
                                before[key] = max(before.get(key, 0.0), errs[1])
                                if errs[0] >= worst.get(key, (-1.0,))[0]:
                                    worst[key] = (*errs, p, v, seed, scale)
    print("| links | schedule | m | closed form below the recurrence, worst | the former closed form there | "
          "the former, worst | fill-work-drain | links | queued | p | v | seed | messages x stage |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (family, schedule, m), (c, old, fwd, lk, qd, p, v, seed, scale) in sorted(worst.items()):
        print(f"| {family} | {schedule} | {m} | {c:.1%} | {old:.1%} | {before[(family, schedule, m)]:.1%} | "
              f"{fwd:.1%} | {lk:.1%} | {qd:.1%} | {p} | {v} | {seed} | {scale} |")


def memory_check(instances: int) -> None:
    """The DP with memory per schedule under the orders against brute force over contiguous splits of random
    training chains (k = 2..3 devices, m = 2..8, tight memory), and what 1F1B's ``k - s`` count would have answered:
    how many of its splits the cost model finds over memory under the order, and how often it misses the optimum."""
    import itertools
    import math

    from placement_dsl.errors import InfeasibleError
    from placement_dsl.evaluate import CostModel, evaluate
    from placement_dsl.graph import Graph, Op
    from placement_dsl.heuristics import run
    from placement_dsl.training import TrainingMemorySpec
    from placement_dsl.zoo.training import with_backward

    rng = np.random.default_rng(0)
    tally = {s: dict.fromkeys(("instances", "feasible", "dp valid", "dp = brute", "1f1b count over memory",
                               "1f1b count misses"), 0) for s in ("interleaved-1f1b", "zb-h1")}
    for t in range(instances):
        schedule = ("interleaved-1f1b", "zb-h1")[t % 2]
        n, k, m = int(rng.integers(2, 7)), int(rng.integers(2, 4)), int(rng.choice([2, 4, 8]))
        ops = [Op(name=f"l{i}", work=float(rng.integers(1, 5)), out_bytes=float(rng.integers(0, 4)),
                  param_bytes=float(rng.integers(0, 3))) for i in range(n)]
        ops, edges = with_backward(ops, [(f"l{i}", f"l{i + 1}") for i in range(n - 1)])
        g = Graph(ops, edges)
        spec = TrainingMemorySpec("1f1b", optimizer_bytes=4.0, weight_bytes=2.0)
        total = float(g.param_bytes.sum() * 2 + (g.out_bytes * ~g.backward).sum())
        cluster = Cluster.stages(k, memory=max(1.0, total * float(rng.uniform(0.4, 1.2))), bandwidth=2.0)
        model = CostModel.named(schedule, microbatches=m, training_memory=spec)
        steady = CostModel.named("pipedream", require=frozenset())
        want = math.inf
        for q in range(1, min(n, k) + 1):
            for cuts in itertools.combinations(range(1, n), q - 1):
                b = (0, *cuts, n)
                fw = [s for s in range(q) for _ in range(b[s], b[s + 1])]
                pl = Placement(g, cluster, fw + fw[::-1])
                if evaluate(pl, model).valid:
                    want = min(want, evaluate(pl, steady).objective)
        row = tally[schedule]
        row["instances"] += 1
        row["feasible"] += math.isfinite(want)
        try:
            got = run("dp", g, cluster, model=model).placement
            row["dp valid"] += evaluate(got, model).valid
            row["dp = brute"] += bool(math.isclose(evaluate(got, steady).objective, want, rel_tol=1e-9))
        except InfeasibleError:
            row["dp = brute"] += not math.isfinite(want)
        try:  # 1F1B's count: the same split search under the spec's own k - s
            old = run("dp", g, cluster, model=CostModel.named("pipedream", training_memory=spec)).placement
            row["1f1b count over memory"] += not evaluate(old, model).valid
            row["1f1b count misses"] += bool(evaluate(old, model).valid and
                                             evaluate(old, steady).objective > want * (1 + 1e-9))
        except InfeasibleError:
            row["1f1b count misses"] += math.isfinite(want)
    print("\nmemory per schedule under the orders: the DP against brute force over contiguous splits")
    print("| schedule | " + " | ".join(next(iter(tally.values()))) + " |")
    print("|---|" + "---|" * len(next(iter(tally.values()))))
    for schedule, row in tally.items():
        print(f"| {schedule} | " + " | ".join(str(v) for v in row.values()) + " |")


def zbv_dags(instances: int, layers: int = 6, m: int = 8) -> None:
    """The DP under ``zbv`` on random training DAGs of ``layers`` layers listed in a random op order, 4 stage devices:
    against the best chain of 2 or 4 ideals (the DP's class, stage k on device k) and against brute force over every
    assignment of the layers to the devices (each gradient with its layer), all scored by the cost model."""
    import itertools
    import math

    from placement_dsl.evaluate import CostModel, evaluate
    from placement_dsl.graph import Graph, Op
    from placement_dsl.heuristics import run
    from placement_dsl.zoo.training import with_backward

    rng = np.random.default_rng(0)
    model = CostModel.named("zbv", microbatches=m)
    tally = dict.fromkeys(("instances", "dp infinite", "dp = best chain of ideals", "dp = brute force",
                           "best chain = brute force"), 0)
    for _ in range(instances):
        edges = {(int(rng.integers(0, j)), j) for j in range(1, layers)}
        edges |= {(a, b) for a, b in rng.integers(0, layers, size=(3, 2)).tolist() if a < b}
        order = rng.permutation(layers).tolist()
        ops = [Op(name=f"l{i}", work=float(rng.integers(1, 6)), out_bytes=float(rng.integers(0, 3)), param_bytes=1.0)
               for i in order]
        ops, es = with_backward(ops, [(f"l{a}", f"l{b}") for a, b in sorted(edges)])
        g, cluster = Graph(ops, es), Cluster.stages(4)

        def score(device: list[int], g=g, cluster=cluster, order=order) -> float:
            fw = [device[i] for i in order]
            ev = evaluate(Placement(g, cluster, fw + fw[::-1]), model)
            return ev.objective if ev.valid else math.inf

        closed = [x for x in range(1 << layers) if all(not (x >> b & 1) or x >> a & 1 for a, b in edges)]
        chains = [[0, *c, (1 << layers) - 1] for h in (2, 4) for c in itertools.combinations(closed[1:-1], h - 1)]
        chains = [c for c in chains if all(a & b == a and a != b for a, b in itertools.pairwise(c))]
        best_chain = min(score([next(k for k in range(len(c) - 1) if c[k + 1] >> i & 1) for i in range(layers)])
                         for c in chains)
        brute = min(score(list(d)) for d in itertools.product(range(4), repeat=layers))
        got = run("dp", g, cluster, model=model, time_limit=10).objective
        tally["instances"] += 1
        tally["dp infinite"] += not math.isfinite(got)
        tally["dp = best chain of ideals"] += math.isclose(got, best_chain, rel_tol=1e-9)
        tally["dp = brute force"] += math.isclose(got, brute, rel_tol=1e-9)
        tally["best chain = brute force"] += math.isclose(best_chain, brute, rel_tol=1e-9)
        print(f"  dp {got:.6g}, best chain of ideals {best_chain:.6g}, brute force {brute:.6g}", flush=True)
    print(f"\nzbv on random {layers}-layer DAGs in a random op order, 4 stage devices, m = {m}")
    print("| " + " | ".join(tally) + " |\n|" + "---|" * len(tally))
    print("| " + " | ".join(str(v) for v in tally.values()) + " |")


def splits(quick: bool, time_limit: float) -> None:
    """Our splits of ``v`` virtual stages per rank (``Interleaved1F1B(virtual=v)``: the DP's answer made one of ``p v``
    stages by :func:`placement_dsl.heuristics.fold_ranks.interleave`) against Megatron's even layout (equal layers per
    virtual stage: the forward colocation groups, in topological order, cut into ``p v`` runs of equal count, stage
    ``s`` on rank ``s mod p``) and against our ``v = 1`` answer, for the zoo's training models on ``p`` = 2 and 4 copies
    of the model's accelerator (memory not binding), ``m`` = 8 and 64: the time per sample by the cost model (the
    recurrence, which the simulator equals: checked on every row)."""
    import math

    from placement_dsl.evaluate import CostModel, evaluate
    from placement_dsl.heuristics import fold_ranks, run

    names = ["gpt2-medium-layers-train", "resnet50-train", "bert-base-layers-train"] if quick else \
        [n for n in zoo.names() if n.endswith("-train") and not n.startswith("regal")]
    print("| model | p | m | ours v=1 | Megatron even v=2 | ours v=2 | Megatron even v=3 | ours v=3 | "
          "best v: ours / v=1 | seconds (v=2, v=3) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        w = zoo.get(name)
        g = w.graph
        acc = next(d for d in w.cluster.devices if not w.cluster.host[w.cluster.index[d.name]])
        nodes = fold_ranks.group_nodes(g)
        for p in (2, 4):
            cluster = Cluster([acc.model_copy(update={"name": f"{acc.name}/{k}", "memory": math.inf})
                               for k in range(p)])
            for m in (8, 64):
                cells, best, one, secs = [], math.inf, math.inf, []
                for v in (1, 2, 3):
                    model = CostModel.named("interleaved-1f1b", microbatches=m, virtual=v)
                    if v > 1:
                        cuts = fold_ranks.even_cuts(np.ones(nodes.n_nodes), p * v)
                        device = np.empty(nodes.n_nodes, dtype=np.int64)
                        for k, st in enumerate(cuts or []):
                            device[st] = k % p
                        even = evaluate(Placement(g, cluster, device[nodes.image]), model) if cuts else None
                        cells.append(f"{even.objective:.6g}" if even is not None and even.valid else "-")
                    start = time.perf_counter()
                    found = run("dp", g, cluster, model=model, time_limit=time_limit)
                    if v > 1:
                        secs.append(f"{time.perf_counter() - start:.1f}")
                    if not found.valid:
                        cells.append("declined")
                        continue
                    sim = simulate(found.placement, "interleaved-1f1b", m).time_per_sample
                    assert math.isclose(sim, found.objective, rel_tol=1e-9), (name, p, m, v, sim, found.objective)
                    cells.append(f"{found.objective:.6g}")
                    if v == 1:
                        one = found.objective
                    else:
                        best = min(best, found.objective)
                ratio = f"{best / one:.3f}" if math.isfinite(best) and math.isfinite(one) else "-"
                print(f"| {name} | {p} | {m} | {' | '.join(cells)} | {ratio} | {', '.join(secs)} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--microbatches", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--memory", type=int, default=0, metavar="N",
                    help="only the memory check: the DP under the orders' memory against brute force, N instances")
    ap.add_argument("--links", type=float, default=None, metavar="X",
                    help="the zoo rows with a link between every two devices, X times their bandwidth")
    ap.add_argument("--ring", action="store_true", help="with --links: a one-way ring of links instead")
    ap.add_argument("--zbv-dags", type=int, default=0, metavar="N",
                    help="only ZBV on DAGs: the DP against the best chain of ideals and brute force, N instances")
    ap.add_argument("--random-links", type=int, default=0, metavar="SEEDS",
                    help="only the closed form against the recurrence on generated pipelines with links, SEEDS each")
    ap.add_argument("--splits", action="store_true",
                    help="only our splits of v = 1, 2, 3 stages per rank against Megatron's even layout")
    ap.add_argument("--time-limit", type=float, default=60.0, help="with --splits: seconds per search")
    args = ap.parse_args()
    start = time.perf_counter()
    if args.splits:
        splits(args.quick, args.time_limit)
        print(f"wall {time.perf_counter() - start:.1f} s")
        return
    if args.random_links:
        random_links(args.random_links)
        print(f"wall {time.perf_counter() - start:.1f} s")
        return
    if args.zbv_dags:
        zbv_dags(args.zbv_dags)
        print(f"wall {time.perf_counter() - start:.1f} s")
        return
    if args.memory:
        memory_check(args.memory)
        print(f"wall {time.perf_counter() - start:.1f} s")
        return
    rows = models(args.quick, args.microbatches, args.links, args.ring) + random_rows(args.seeds or (5 if args.quick else 20),
                                                                 args.microbatches)
    print("| input | schedule | p | v | simulator | recurrence (err) | closed form (err) | steady (err) |")
    print("|---|---|---|---|---|---|---|---|")
    worst: dict[tuple[str, str], float] = {}
    for name, schedule, p, v, sim, rec, closed, steady, note in rows:
        if sim is None:
            print(f"| {name} | {schedule} | {p} | {v} | refused: {note} | | | |")
            continue
        errs = (error(rec, sim), error(closed, sim), error(steady, sim))
        kind = "random" if name.startswith("random") else "zoo"
        for label, e in zip(("recurrence", "closed form", "steady"), errs):
            worst[(schedule, kind, label)] = max(worst.get((schedule, kind, label), 0.0), e)
        if kind == "zoo" or args.quick:
            print(f"| {name} | {schedule} | {p} | {v} | {sim:.6g} | {rec:.6g} ({errs[0]:.2%}) | "
                  f"{closed:.6g} ({errs[1]:.2%}) | {steady:.6g} ({errs[2]:.2%}) |")
    print(f"\nlargest relative error against the simulator at m = {args.microbatches}:")
    for (schedule, kind, label), e in sorted(worst.items()):
        print(f"  {schedule:<17} {kind:<7} {label:<12} {e:.3%}")
    print(f"wall {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
