"""A RINS-style neighbourhood for non-contiguous max-load splits: re-solve where good splits disagree.

Danna, Rothberg and Le Pape's relaxation-induced neighbourhood search (Math. Programming 2005)
fixes the variables on which the incumbent and the LP optimum agree and solves the rest as a
smaller MIP. Here the parties are several good splits (polish from different seeds and block
sizes): a unit that every split puts on the same device keeps that device (a ``Pin``), and
Tarnawski's throughput IP (Fig. 6 without contiguity) re-solves the units they disagree on,
warm-started by the best split, so the answer is never worse than it. Identical accelerators
make device labels arbitrary, so each split is first relabelled, within each class of
interchangeable devices, to agree most with the best one (greedy matching of overlaps).

On Tarnawski et al.'s ResNet50 inference layer graph, three polished splits (33.36, 33.36, 33.33)
disagree on 39 of 177 layers, and the neighbourhood's optimum is 33.25 (the paper's IP: 33.31),
where the full IP warm-started by the best of them finds nothing better in 60 s.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cluster import Cluster
from ..errors import SpecError
from ..placement import Placement
from ..problem import Problem
from .pin import resolve_free, units


def relabel(assign: np.ndarray, ref: np.ndarray, cluster: Cluster) -> np.ndarray:
    """``assign`` with the devices of each interchangeable class renamed to overlap ``ref`` the most (greedy)."""
    out = np.asarray(assign).copy()
    for group in cluster.homogeneous_groups():
        if len(group) < 2:
            continue
        overlap = np.array([[np.sum((assign == a) & (ref == b)) for b in group] for a in group])
        rename: dict[int, int] = {}
        while len(rename) < len(group):
            i, j = np.unravel_index(int(np.argmax(overlap)), overlap.shape)
            rename[group[i]] = group[j]
            overlap[i, :] = -1
            overlap[:, j] = -1
        for a, b in rename.items():
            out[assign == a] = b
    return out


def agreement(placements: Sequence[Placement], cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """The first placement's devices and, per op, whether every placement (relabelled) agrees with it."""
    ref = np.asarray(placements[0].assign)
    agree = np.ones(ref.size, dtype=bool)
    for p in placements[1:]:
        agree &= relabel(np.asarray(p.assign), ref, cluster) == ref
    return ref, agree


def rins(problem: Problem, placements: Sequence[Placement], *, time_limit: float = 40.0,
         solver: str = "highs") -> Placement:
    """The throughput IP over the units the valid ``placements`` disagree on, the others pinned where the
    best one runs them; never worse than the best of them.

    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.objectives import Throughput
    >>> g = Graph([Op(name=f"v{i}", work={"accelerator": w, "cpu": 10 * w}) for i, w in enumerate([8, 3, 3, 3])])
    >>> problem = Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), [])
    >>> a, b = (Placement(g, problem.cluster, x) for x in ([0, 1, 1, 0], [0, 1, 0, 1]))  # both 11
    >>> problem.evaluate(rins(problem, [a, b], time_limit=10)).objective  # v0, v1 agree; v2, v3 join v1
    9.0
    """
    valid = [p for p in placements if problem.is_valid(p)]
    if not valid:
        raise SpecError("rins: none of the given placements is valid for the problem; give at least one valid split")
    valid.sort(key=lambda p: problem.evaluate(p).objective)
    best = valid[0]
    g = problem.graph
    _, agree = agreement(valid, problem.cluster)  # relabelled to agree with the best one, which stays as it is
    free = [r for r in units(problem) if not agree[g.group_id == r].all()]
    result = resolve_free(problem, best, free, "throughput", seconds=time_limit, solver=solver)
    found = result.placement
    if found is not None and problem.is_valid(found) and \
            problem.evaluate(found).objective < problem.evaluate(best).objective:
        return found
    return best
