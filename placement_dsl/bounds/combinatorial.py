"""Combinatorial lower bounds and variable fixing for DAG-ordered throughput placements.

The class of placements
-----------------------
A placement is *DAG-ordered* when its devices can be listed in a sequence (the pipeline)
such that every forward edge ``u -> v`` goes from ``u``'s device to the same device or a
later one. Equivalently, the quotient graph over forward edges is acyclic. These are the
splits that Archer et al. (ICML 2024, Fig. 3) model with ideal variables ``y_{v,b}`` and
exactly the search space of Tarnawski et al.'s DP over ideals (NeurIPS 2020, §5.1.1 and
App. B: in training graphs the chain is carved on the forward part and backward ops
follow their colocated forward ops). Colocation groups are treated as single ops.

Notation: ``k`` accelerators (identical, not host) and ``l`` CPUs (host devices) as read
by :func:`placement_dsl.io.load_workload`; ``w_g = min(time on an accelerator, time on a
CPU)`` for a colocation group ``g``; ``A_g`` (``D_g``) the total ``w`` of ``g`` and its
ancestors (descendants) through forward edges between groups; and
``rho = max_g w_g / cpu_time_g`` (≤ 1), the most accelerator-work a unit of CPU time can
absorb.

The ancestor/descendant argument
--------------------------------
Let a DAG-ordered placement have max load ``T`` and put group ``g`` on the ``b``-th
accelerator of the sequence (``b = 1..k`` counts accelerators only). Every ancestor of
``g`` sits on an accelerator ``1..b`` or on a CPU; an accelerator spends at least ``w_u``
on each op ``u`` it holds and a CPU at least ``w_u / rho``. Hence
``A_g <= b*T + l*rho*T``; symmetrically ``D_g <= (k - b + 1 + l*rho) * T``. Therefore::

    T >= tau[g, b] = max(A_g / (b + l*rho), D_g / (k - b + 1 + l*rho), acc_time_g)

A CPU sits in a *gap* of the accelerator sequence: gap ``b = 1..k+1`` is just before
accelerator ``b`` (``k+1``: after the last). If ``g`` is on a CPU in gap ``b``, its ancestors
are on accelerators ``1..b-1`` or on CPUs and its descendants on accelerators ``b..k`` or
on CPUs, so::

    T >= tau_cpu[g, b] = max(A_g / (b - 1 + l*rho), D_g / (k - b + 1 + l*rho), cpu_time_g)

(``x / 0`` read as ``inf`` for ``x > 0`` and 0 for ``x = 0``). :func:`chain_bound` is
``max_g min(min_b tau[g, b], min_b tau_cpu[g, b])``; :func:`position_windows` fixes
``x_{g,b} = 0`` whenever ``tau[g, b] > target`` (and the CPU-in-gap-``b`` variables when
``tau_cpu[g, b] > target``), which every DAG-ordered placement of max load ``<= target``
respects *for every valid numbering of its devices*. Used in a MIP, the cuts read
``T >= sum_b tau[g, b] x_{g,b} + sum_b tau_cpu[g, b] xc_{g,b}`` (one per group; exactly
one term is active in an integer point).
"""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..graph import Graph
from ..structure import ChainData, chain_data
from .simple import simple_lower_bound


def chain_bound(graph: Graph, cluster: Cluster, data: ChainData | None = None) -> float:
    """Ancestor/descendant lower bound on the max load of any DAG-ordered placement.

    ``max(L_simple, max_g min(min_b tau[g, b], tau_cpu[g]))`` (module doc for the proof).

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=f"v{i}", work=1.0) for i in range(4)],
    ...           [("v0", "v1"), ("v1", "v2"), ("v2", "v3")])
    >>> chain_bound(g, Cluster.stages(3))  # simple bound 4/3; v1 needs its 2 ancestors or 3 descendants in 1 stage
    1.5
    """
    data = data or chain_data(graph, cluster)
    tau, tau_cpu = data.tau()
    per_group = np.minimum(tau.min(axis=1), tau_cpu.min(axis=1))
    return float(max(simple_lower_bound(graph, cluster), per_group.max()))


def position_windows(graph: Graph, cluster: Cluster, target: float,
                     data: ChainData | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Allowed accelerator positions and CPU permission for a max load ``<= target``.

    Returns ``(allowed, cpu_ok)``: ``allowed[g, b]`` is ``tau[g, b] <= target`` and
    ``cpu_ok[g, b]`` is ``tau_cpu[g, b] <= target`` (CPU in gap ``b``). In every DAG-ordered placement with max load
    ``<= target`` and any numbering of its accelerators along the pipeline, group ``g``
    sits at an allowed position or on a CPU in an allowed gap (module doc). Fixing the other
    variables to 0 turns ``min T`` into a model whose bound ``LB'`` certifies
    ``OPT >= min(target, LB')``.
    """
    data = data or chain_data(graph, cluster)
    tau, tau_cpu = data.tau()
    slack = 1e-9 * max(1.0, abs(target))
    return tau <= target + slack, tau_cpu <= target + slack
