"""A new problem term with its own block template and its rule in an existing formulation.

The term says what must hold (embedding ops on at most ``limit`` devices); the template writes
it as rows; one line gives the formulation the rule from the term to the template.

Run: python examples/custom_constraint.py
"""
from dataclasses import dataclass

import pyomo.environ as pyo

from placement_dsl import Cluster, Graph, Op
from placement_dsl.blocks import BlockTemplate
from placement_dsl.constraints import Term
from placement_dsl.formulations import get
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.solve import solve


def embeddings(graph):
    return [op.name for op in graph.ops if op.attrs.get("kind") == "embedding"]


@dataclass(frozen=True)
class EmbeddingStages(Term):
    """Embedding ops live on at most ``limit`` devices."""

    limit: int = 1

    def check(self, placement):
        used = {placement.device_of(v) for v in embeddings(placement.graph)}
        return [f"embedding ops on {len(used)} devices > {self.limit}"] if len(used) > self.limit else []


class EmbeddingDevices(BlockTemplate):
    """At most ``limit`` devices hold embedding ops: ``holds_d >= x_{vd}``, ``sum_d holds_d <= limit``."""

    name = "embedding_devices"  # needs the assignment link (the default), provides nothing

    def __init__(self, limit: int = 1):
        self.limit = limit

    def build(self, blk, ctx):
        ops = embeddings(ctx.graph)
        blk.holds = pyo.Var(ctx.devices, domain=pyo.Binary, doc="device d holds an embedding op")
        blk.marks = pyo.Constraint(ops, ctx.devices, doc="an embedding op on d marks d", rule=lambda b, v, d:
                                   b.holds[d] >= ctx.x(ctx.graph.index[v], ctx.cluster.index[d]))
        blk.limit = pyo.Constraint(expr=sum(blk.holds.values()) <= self.limit, doc="few embedding devices")

    def values(self, blk, ctx, warm):
        used = {warm.assign[ctx.graph.index[v]] for v in embeddings(ctx.graph)}
        return ((var, float(ctx.cluster.index[d] in used)) for d, var in blk.holds.items())


get("throughput").add_rule(EmbeddingStages, lambda term, problem: [EmbeddingDevices(term.limit)])

if __name__ == "__main__":
    ops = [Op(name=f"emb{i}", work=3, out_bytes=1, attrs={"kind": "embedding"}) for i in range(3)]
    graph = Graph(ops + [Op(name="head", work=1)], [(f"emb{i}", "head") for i in range(3)], name="embeddings")
    problem = Problem(graph, Cluster.accelerators(3), Throughput(), [EmbeddingStages(limit=2)])
    result = solve(problem, formulation="throughput", time_limit=10)
    print(result.status.value, result.objective, result.placement.mapping())
    assert problem.is_valid(result.placement)
