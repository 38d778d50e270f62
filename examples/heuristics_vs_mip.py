"""Every heuristic against a time-limited MIP warm-started by the best of them.

The heuristics (Tarnawski et al.'s DP over ideals, DPL, greedy and local search; Archer et al.'s
SliceGraph with random-T, BRKGA and MLA orderings; PipeDream's path DP) each finish in about a
second or less. The MIP (Tarnawski et al. Fig. 6 without the
contiguity constraints, §5.2) searches all placements, starts from the best heuristic split, and
reports a proven lower bound, so the table says how far each heuristic is from what is provable.

Run: python examples/heuristics_vs_mip.py   (about 10 s)
"""
from placement_dsl import Memory, Problem, Throughput, zoo
from placement_dsl.errors import PlacementError
from placement_dsl.heuristics import run
from placement_dsl.heuristics.base import methods_for
from placement_dsl.solve import solve

workload = zoo.get("bert-large-ops")
problem = Problem(workload.graph, workload.cluster, Throughput(), [Memory()])
model = problem.cost_model()
print(f"{problem.graph!r} on {problem.cluster!r}")

found = {}
for method in methods_for("max_load"):  # the throughput heuristics
    try:
        found[method] = run(method, problem.graph, problem.cluster, model=model, seed=0)
    except PlacementError as err:  # e.g. too many ideals for the exact DP
        print(f"{method:13} not applicable: {err}")
        continue

best = min(found.values(), key=lambda r: r.objective)
result = solve(problem, time_limit=6, warm_start=best.placement)
print(f"MIP (non-contiguous, warm start {best.method} {best.objective:.4f}): {result.status.value}, "
      f"objective {result.objective:.4f}, bound {result.bound:.4f}, gap {result.gap:.2%}, "
      f"start accepted: {result.start_accepted}")

print(f"\n{'method':13} {'max load':>10} {'vs bound':>9} {'seconds':>8}")
for method, r in sorted(found.items(), key=lambda kv: kv[1].objective):
    note = f"  (exact among {r.exact_among})" if r.exact_among else ""
    print(f"{method:13} {r.objective:10.4f} {r.objective / result.bound:9.3f} {r.seconds:8.2f}{note}")
print(f"{'MIP':13} {result.objective:10.4f} {result.objective / result.bound:9.3f} {result.seconds:8.2f}")
assert result.objective <= best.objective + 1e-9 and result.bound <= result.objective
