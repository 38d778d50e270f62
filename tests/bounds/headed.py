"""Chains of cut ops with blocks of parallel heads between them, small enough for brute force: the instances of the
cut-stages chain's and the block prices' tests."""
from __future__ import annotations

from itertools import pairwise

from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem


@st.composite
def headed_chains(draw):
    """Cut ops ``c0 -> block -> c1 -> block -> ...``, each block two or three parallel heads of one or two ops (or
    none: an edge), a skip edge over a block or over a cut op now and then (a residual tensor), two sources feeding
    ``c0`` or two sinks after the last cut op sometimes (the blocks at the ends); integer times from 0 (views) and
    tensor sizes from 0; two stages and up to 10 ops, or three and up to 8 (brute force scores every DAG-ordered
    placement)."""
    k = draw(st.integers(2, 3))
    room = 10 if k == 2 else 8
    time, size = st.integers(0, 5).map(float), st.integers(0, 4).map(float)

    def op(name: str) -> Op:
        return Op(name=name, work=draw(time), out_bytes=draw(size))

    ops, edges = [], []
    if draw(st.booleans()):  # a block before the first cut op
        ops += [op("s0"), op("s1")]
        edges += [("s0", "c0"), ("s1", "c0")]
    ops.append(op("c0"))
    i = 0
    while len(ops) + 2 <= room and (i == 0 or draw(st.booleans())):
        heads = draw(st.integers(0, 3))
        if heads == 0 or len(ops) + 3 > room:
            edges.append((f"c{i}", f"c{i + 1}"))
        else:
            for h in range(heads):
                if len(ops) + 2 > room:
                    break
                length = 2 if len(ops) + 3 <= room and draw(st.booleans()) else 1
                chain = [f"h{i}.{h}.{j}" for j in range(length)]
                ops += [op(x) for x in chain]
                edges += [(f"c{i}", chain[0]), *pairwise(chain), (chain[-1], f"c{i + 1}")]
            if draw(st.booleans()):
                edges.append((f"c{i}", f"c{i + 1}"))  # the block's skip: its input read after it
        ops.append(op(f"c{i + 1}"))
        if i > 0 and draw(st.booleans()):
            edges.append((f"c{i - 1}", f"c{i + 1}"))  # a residual over the cut op c{i}
        i += 1
    if len(ops) + 2 <= room and draw(st.booleans()):  # a block after the last cut op
        ops += [op("t0"), op("t1")]
        edges += [(f"c{i}", "t0"), (f"c{i}", "t1")]
    bandwidth = draw(st.sampled_from([0.5, 1.0, 2.0]))
    return Problem(Graph(ops, sorted(set(edges))), Cluster.stages(k, bandwidth=bandwidth), Bottleneck(), [DagOrder()])
