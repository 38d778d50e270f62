"""Compiled kernels of the DP over ideals (see :mod:`.ideals` for the algorithm), by meaning in three modules:
:mod:`.ideal_enumeration` (the ideals, their sums and look-up), :mod:`.ideal_boundaries` (the tensors crossing an
ideal's boundary, a stage's input and output) and :mod:`.ideal_sweep` (the DP's sweep over pairs of ideals and
the read-out of a split's value). Their public names are importable from here; each module's
internal helpers stay in it.

Ideals are bitsets: rows of ``uint64`` words over the supernodes of the contracted DAG.
Every kernel is ``numba.njit(cache=True)``: compiling them takes a few seconds, which would
otherwise be paid by every process that runs the DP (each test worker, each benchmark and
CLI call); the on-disk cache makes the second and later processes start at once.
"""
from __future__ import annotations

from .ideal_boundaries import boundaries, has_node, stage_io
from .ideal_enumeration import (
    DEBRUIJN,
    FNV_OFFSET,
    FNV_PRIME,
    INF,
    ONE,
    bit_index,
    enumerate_ideals,
    ideal_sums,
    log2_ideal_estimate,
    lookup,
    widest_level,
)
from .ideal_sweep import (
    CLOCK_PAIRS,
    FULL,
    HALF,
    NONE,
    least_load,
    mode_load,
    push_below,
    removed_node,
    replicated_load,
    split_value,
    stage_load,
    sweep,
)

__all__ = [
    "CLOCK_PAIRS", "DEBRUIJN", "FNV_OFFSET", "FNV_PRIME", "FULL", "HALF", "INF", "NONE", "ONE", "bit_index",
    "boundaries", "enumerate_ideals", "has_node", "ideal_sums", "least_load", "log2_ideal_estimate", "lookup",
    "mode_load", "push_below", "removed_node", "replicated_load", "split_value", "stage_io", "stage_load", "sweep",
    "widest_level",
]
