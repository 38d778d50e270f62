"""Certificates for zoo models: the best placement, a proven lower bound, and the gap.

Archer et al. (ICML 2024) bound the maximum-throughput pipeline partitioning problem (MTPP) by a
hierarchy of relaxations, cheapest first: the closed-form bound of Lemma 3.3 (``simple``), the
three-superblock MIP of §3.2 (``superblock``), one MIP per guessed bottleneck block (§3.3,
``guess``), and the exact MIP of Fig. 3. Heuristics (SliceGraph, BRKGA) supply the placements.
``certify`` runs the levels until the gap target is met or the budget is spent.

Each model here is placed on four identical pipeline stages with its accelerators' memory and
bandwidth, with the memory overflow streamed (Archer eq. 2) and every edge going forward
(``DagOrder``, eq. 8).

Run: python examples/certify_zoo.py   (about 25 s)
"""
from placement_dsl import Bottleneck, DagOrder, Overflow, Problem, Stages, zoo
from placement_dsl.certify import certify

MODELS = ("bert-base-layers", "gnmt-ish", "transformer-small", "regal-1")
LEVELS = ("simple", "superblock", "guess", "exact")

summary = []
for name in MODELS:
    workload = zoo.get(name)
    accelerator = next(d for d in workload.cluster.devices if not d.host)
    stages = Stages(4, memory=accelerator.memory, bandwidth=accelerator.bandwidth)
    problem = Problem(workload.graph, stages, Bottleneck(), [Overflow(), DagOrder()])
    cert = certify(problem, budget=6.0, levels=LEVELS, gap=0.001)
    print(f"== {name}: {workload.graph.n} ops")
    print(cert.table())
    assert cert.bound <= cert.objective and problem.is_valid(cert.placement)
    summary.append((name, cert))

print(f"\n{'model':18} {'best':>12} {'bound':>12} {'gap':>8}  certified")
for name, cert in summary:
    print(f"{name:18} {cert.objective:12.6g} {cert.bound:12.6g} {cert.gap:8.2%}  {cert.certified}")
print(f"certified {sum(c.certified for _, c in summary)} of {len(summary)} models within 0.1%")
