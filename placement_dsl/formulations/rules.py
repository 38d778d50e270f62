"""The rules every assignment-based formulation shares: problem terms to block templates.

Each rule is ``rule(term, problem) -> [template, ...]``. :data:`BASE_RULES` is the table of
Archer et al.'s exact MIP (ICML 2024, Fig. 3) and Tarnawski et al.'s throughput IP
(NeurIPS 2020, Fig. 6); :data:`BASE` is the (unregistered) formulation that owns it and the
parent of every assignment-based formulation (throughput, exact, latency, schedule), which
inherit it and override entries. The inheritance is resolved at use, so a rule added to
:data:`BASE` (or to ``BASE_RULES``) after the formulations were defined reaches all of them.
"""
from __future__ import annotations

from ..blocks import (
    Colocation,
    Contiguity,
    DagOrderBlock,
    DeviceLoad,
    GPipeObjective,
    MaxLoad,
    MemoryCapacity,
    OverflowCost,
    PinOps,
)
from ..blocks.base import BlockTemplate
from ..blocks.routes import LinkLoads, link_rows_needed
from ..constraints import AllowedKinds, Colocate, Congestion, Contiguous, DagOrder, Memory, Overflow, Pin
from ..errors import SpecError
from ..objectives import GPipe, ObjectiveTerm
from ..problem import Problem
from .base import Formulation, Kind, Rule, drop


def max_load(term: ObjectiveTerm, problem: Problem) -> list[BlockTemplate]:
    """Bottleneck / Throughput / PipeDream: device loads and ``minimize bottleneck`` (Archer eq. 5-7, Fig. 6).

    Another objective (latency, makespan) is refused: minimizing the max load would not be its optimum.
    """
    if not term.bounds_max_load:
        raise SpecError(f"objective {type(term).__name__} is not a max device load, which this formulation "
                        "minimizes; use formulation='auto' to pick the one written for it")
    return [DeviceLoad(), MaxLoad(), *([LinkLoads()] if link_rows_needed(problem.cluster) else [])]


def gpipe(term: GPipe, problem: Problem) -> list[BlockTemplate]:
    """GPipe: device loads by pass and ``minimize max FW + max BW`` (Tarnawski §5.3, App. A)."""
    if getattr(term, "microbatches", None) is not None:
        raise SpecError(f"GPipe(microbatches={term.microbatches}): the IP writes GPipe's steady state (m -> inf); "
                        "score the fill and drain with the cost model (drop microbatches for the IP)")
    if link_rows_needed(problem.cluster):
        raise SpecError("GPipe: the IP bounds each pass by device loads only; on this cluster a link's load can be "
                        "larger (multi-hop routes or host devices), so use Throughput/PipeDream or a heuristic")
    return [DeviceLoad(), GPipeObjective()]


def colocate(term: Colocate, problem: Problem) -> list[BlockTemplate]:
    """Shared variables need no block (the units are groups); ``shared=False`` writes equalities."""
    return [] if term.shared else [Colocation()]


BASE_RULES: dict[type, Rule] = {
    ObjectiveTerm: max_load,
    GPipe: gpipe,
    Memory: lambda term, problem: [MemoryCapacity()],
    Overflow: lambda term, problem: [OverflowCost()],
    Contiguous: lambda term, problem: [Contiguity()],
    DagOrder: lambda term, problem: [DagOrderBlock()],
    Colocate: colocate,
    Pin: lambda term, problem: [PinOps()],
    AllowedKinds: drop,  # folded into the ops' work tables (the graph the model reads)
    Congestion: drop,  # a pipeline's link loads are already resources (LinkLoads); the schedule models read the mode
}


def _no_skeleton(problem: Problem) -> list[BlockTemplate]:
    return []


BASE = Formulation("base", Kind.EXACT, _no_skeleton, doc="""
The rule table shared by the assignment-based formulations; not a model of its own (no skeleton).""")
BASE.rules = BASE_RULES  # one table: an entry added to either reaches every child
