"""Training pipelines: PipeDream (1F1B) versus GPipe on a zoo training graph, checked by the simulator.

Tarnawski et al. (NeurIPS 2020, §5.3) give two steady-state objectives for a split of a training
graph (forward and backward ops): PipeDream's one-forward-one-backward schedule runs at
``max_d (FW_d + BW_d)`` per sample, GPipe's flushed schedule at ``max_d FW_d + max_d BW_d``.
The best split differs between them. This script solves both MIPs (warm-started by the DP over
ideals), scores each split under both objectives, and pushes microbatches through the
discrete-event simulator to show the time per sample approaching the analytic value.

Run: python examples/training_schedules.py   (about 10 s)
"""
from placement_dsl import Contiguous, GPipe, Memory, PipeDream, Problem, evaluate, zoo
from placement_dsl.simulate import analytic_time_per_sample, throughput_curve
from placement_dsl.solve import solve

workload = zoo.get("gnmt-ish-train")
graph, cluster = workload.graph, workload.cluster
print(f"{graph!r} on {cluster!r}: {int(graph.backward.sum())} backward ops")

splits, proven = {}, {}
for objective in (PipeDream(), GPipe()):
    problem = Problem(graph, cluster, objective, [Memory(), Contiguous()])
    result = solve(problem, time_limit=8, warm_start="dp")
    name = type(objective).__name__
    splits[name] = result.placement
    proven[name] = result.status.value == "optimal"
    print(f"{name:9} MIP: {result.status.value}, objective {result.objective:.4f} ms, bound {result.bound:.4f}")

print("\nsplit optimised for | PipeDream objective | GPipe objective")
for name, placement in splits.items():
    print(f"{name:19} | {evaluate(placement, 'pipedream').objective:19.4f} | "
          f"{evaluate(placement, 'gpipe').objective:15.4f}")

microbatches = [4, 16, 64, 256]
print("\nsimulated time per sample (ms) for", microbatches, "microbatches")
for name, schedule in (("PipeDream", "1f1b"), ("GPipe", "gpipe")):
    placement = splits[name]
    curve = throughput_curve(placement, schedule, microbatches)
    steady = analytic_time_per_sample(placement, schedule)
    print(f"{schedule:5} on the {name} split: " + ", ".join(f"{t:.2f}" for _, t in curve)
          + f"  -> analytic {steady:.4f}")
    assert curve[-1][1] >= steady - 1e-9 and curve[-1][1] - steady < 0.05 * steady

pd, gp = splits["PipeDream"], splits["GPipe"]
if all(proven.values()):  # both optima proven: each split is best for its own schedule
    assert evaluate(pd, "pipedream").objective <= evaluate(gp, "pipedream").objective + 1e-9
    assert evaluate(gp, "gpipe").objective <= evaluate(pd, "gpipe").objective + 1e-9
    print("\neach split is best for its own schedule")
