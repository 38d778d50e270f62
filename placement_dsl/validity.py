"""Structural validity of a placement, checked by the cost model (:func:`placement_dsl.evaluate.evaluate`): what a
violation is, contiguity of each device's ops (Tarnawski Def. 3.1), DAG order and an acyclic quotient graph. These
checks need the placement alone; the ones that need the cost model's figures (memory) stay with it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .placement import Placement

__all__ = ["Violation", "contiguity_violations", "contiguity_witness", "order_violations", "quotient_cycle"]


@dataclass(frozen=True)
class Violation:
    """One reason a placement is invalid: the check it fails and what fails.

    ``essential``: the objective itself has no value without it (no invocation order, no GPipe
    fill-and-drain schedule), so it counts against validity whatever checks are required.
    """

    check: str
    message: str
    essential: bool = False

    def counts(self, require: frozenset[str]) -> bool:
        """Whether this violation makes a placement invalid under the checks ``require``."""
        return self.essential or self.check in require



def contiguity_witness(p: Placement) -> list[tuple[int, int]]:
    """Pairs ``(label, op)`` proving non-contiguity (Tarnawski Def. 3.1).

    A label is ``2 * device + backward``: forward and backward parts are checked separately.
    Op ``b`` of that label is reached from the same label's ops through an op outside it.
    """
    g = p.graph
    label = (2 * p.assign + g.backward.astype(np.int64)).tolist()  # Python ints: bitmasks grow past 64 bits
    preds = g.predecessor_lists
    reach = [0] * g.n  # bitmask of labels from which a node is strictly reachable
    bad: list[tuple[int, int]] = []
    for v in g.topo.tolist():
        r = 0
        lv = label[v]
        for u in preds[v]:
            ru = reach[u]
            if (ru >> lv) & 1 and label[u] != lv:
                bad.append((lv, v))
            r |= ru | (1 << label[u])
        reach[v] = r
    return bad


def contiguity_violations(p: Placement) -> list[Violation]:
    """One violation per device part (forward, backward) whose ops are not contiguous."""
    seen: set[int] = set()
    out = []
    for lab, v in contiguity_witness(p):
        if lab in seen:
            continue
        seen.add(lab)
        part = "backward" if lab % 2 else "forward"
        out.append(Violation("contiguous", f"device {p.cluster.names[lab // 2]!r}: {part} ops are not contiguous "
                                           f"(op {p.graph.names[v]!r} is reached from the device through another device)"))
    return out


def order_violations(p: Placement) -> list[Violation]:
    """An edge back to an earlier device (DAG order), and a cycle in the devices' quotient graph."""
    g, c = p.graph, p.cluster
    du, dv = p.assign[g.src], p.assign[g.dst]
    out = []
    back = np.flatnonzero(du > dv)
    if back.size:
        e = back[0]
        out.append(Violation("dag_order", f"edge {g.names[g.src[e]]!r} -> {g.names[g.dst[e]]!r} goes from device "
                                          f"{c.names[du[e]]!r} back to earlier device {c.names[dv[e]]!r} "
                                          f"({back.size} such edges)"))
    cross = du != dv
    pairs = set(zip(du[cross].tolist(), dv[cross].tolist()))
    cycle = quotient_cycle(pairs)
    if cycle:
        out.append(Violation("acyclic", f"quotient graph has a cycle through devices {[c.names[d] for d in cycle]}"))
    return out


def quotient_cycle(pairs: set[tuple[int, int]]) -> list[int]:
    """A cycle of the directed graph of ``pairs`` (the devices' quotient: a few nodes) as its nodes in order, from the
    least node that reaches one (depth-first, successors in order); ``[]`` when it has none."""
    succ: dict[int, list[int]] = {}
    for a, b in sorted(pairs):
        succ.setdefault(a, []).append(b)
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for root in sorted(succ):
        if root in state:
            continue
        path, stack = [root], [iter(succ[root])]
        state[root] = 1
        while stack:
            w = next(stack[-1], None)
            if w is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(w) == 1:
                return path[path.index(w):]
            elif w not in state:
                state[w] = 1
                path.append(w)
                stack.append(iter(succ.get(w, ())))
    return []
