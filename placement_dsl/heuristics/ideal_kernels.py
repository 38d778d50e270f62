"""Compiled kernels of the DP over ideals (see :mod:`.ideals` for the algorithm), by meaning in three modules:
:mod:`.ideal_enumeration` (the ideals, their sums and look-up), :mod:`.ideal_boundaries` (the tensors crossing an
ideal's boundary, a stage's input and output) and :mod:`.ideal_sweep` (the DP's sweep over pairs of ideals and
the read-out of a split's value). Every name stays importable from here, as before.

Ideals are bitsets: rows of ``uint64`` words over the supernodes of the contracted DAG.
Every kernel is ``numba.njit(cache=True)``: compiling them takes a few seconds, which would
otherwise be paid by every process that runs the DP (each test worker, each benchmark and
CLI call); the on-disk cache makes the second and later processes start at once.
"""
from __future__ import annotations

from .ideal_boundaries import _has, _meets, _popcount, _stage_io, boundaries
from .ideal_enumeration import (
    _DEBRUIJN_INDEX,
    DEBRUIJN,
    FNV_OFFSET,
    FNV_PRIME,
    INF,
    ONE,
    _bit_index,
    _hash,
    _insert,
    _rehash,
    _same,
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
    _below_some,
    _least_load,
    _live_states,
    _load,
    _may_improve,
    _most_work_below,
    _push_below,
    _removed,
    _replicated,
    _stage_load,
    _unused,
    split_value,
    sweep,
)

__all__ = ["CLOCK_PAIRS", "DEBRUIJN", "FNV_OFFSET", "FNV_PRIME", "FULL", "HALF", "INF", "NONE", "ONE", "boundaries",
           "enumerate_ideals", "ideal_sums", "log2_ideal_estimate", "lookup", "split_value", "sweep", "widest_level"]
_PRIVATE = (_DEBRUIJN_INDEX, _below_some, _bit_index, _has, _hash, _insert, _least_load, _live_states, _load,
            _may_improve, _meets, _most_work_below, _popcount, _push_below, _rehash, _removed, _replicated, _same,
            _stage_io, _stage_load, _unused)  # the kernels' helpers, importable from here as before
