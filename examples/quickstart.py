"""Quickstart: declare a graph and a cluster, score a placement, run a heuristic, solve a MIP, read the answer.

Run: python examples/quickstart.py   (a few seconds)
"""
import itertools

from placement_dsl import Cluster, Contiguous, Graph, Memory, Op, Placement, Problem, Throughput, evaluate
from placement_dsl.heuristics import run
from placement_dsl.solve import solve

# A small transformer-like model: times in ms per device kind, sizes in bytes.
ops = [Op(name="embed", work={"accelerator": 1.0, "cpu": 4.0}, param_bytes=8e9, out_bytes=2e6)]
for i in range(1, 5):
    ops.append(Op(name=f"attn{i}", work={"accelerator": 2.0, "cpu": 20.0}, param_bytes=2e9, out_bytes=2e6))
    ops.append(Op(name=f"ffn{i}", work={"accelerator": 3.0, "cpu": 30.0}, param_bytes=4e9, out_bytes=2e6))
ops.append(Op(name="head", work={"accelerator": 1.0, "cpu": 5.0}, param_bytes=2e9))
names = [op.name for op in ops]
graph = Graph(ops, list(itertools.pairwise(names)), name="tiny-transformer")

# Two 16 GB accelerators and a CPU; bandwidth in bytes per ms (16 GB/s).
cluster = Cluster.accelerators(2, memory=16e9, cpus=1, bandwidth=16e6)

# 1. Score a hand-made placement with the cost model (it overfills acc0's memory: the table says so).
half = {name: ("acc0" if k < 5 else "acc1") for k, name in enumerate(names)}
manual = Placement.from_mapping(graph, cluster, half)
print(evaluate(manual, "throughput").table())

# 2. The exact DP over ideals: the best contiguous split, with a proof of optimality among those.
dp = run("dp", graph, cluster)
print(f"dp: max load {dp.objective:.4f} ms, exact among {dp.exact_among} placements")

# 3. The same question as a declarative problem, solved as a MIP warm-started by the DP.
problem = Problem(graph, cluster, objective=Throughput(), constraints=[Memory(), Contiguous()])
result = solve(problem, solver="highs", time_limit=10, warm_start="dp")
print(f"status {result.status.value}; objective {result.objective:.4f}; bound {result.bound:.4f}; "
      f"gap {result.gap:.2%}; warm start accepted: {result.start_accepted}")
for device in cluster.names:
    print(f"  {device}: {result.placement.ops_on(device)}")
assert problem.is_valid(result.placement) and result.bound <= result.objective
