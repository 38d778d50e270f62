"""The DAG-ordered chain formulation of Tarnawski et al.'s contiguous throughput problem.

The search space of Tarnawski et al.'s DP over ideals (NeurIPS 2020, §5.1.1, App. B) written
with Archer et al.'s cumulative variables (ICML 2024, Fig. 3), CPUs in gaps of the accelerator
sequence, ancestor/descendant cuts and, for a target max load ``T*``, position windows
(``docs/strengthening.md``). A :class:`LoadTarget` term in the problem switches the windows on;
the optimum is then certified by ``min(T*, solver bound)`` (:func:`certified_bound`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..blocks.chain import AncestorCuts, ChainAssignment, ChainOrder, ChainTensorCut, CpuGaps, PositionWindows
from ..constraints import Term, TemplateRef
from ..errors import SpecError
from ..objectives import GPipe
from ..problem import Problem
from .base import Step, term_steps

# templates of the problem's terms that the chain's own blocks replace (its order implies contiguity)
REPLACED = frozenset({"assignment", "tensor_cut", "dag_order", "contiguity", "colocation"})


@dataclass(frozen=True)
class LoadTarget(Term):
    """Seek the optimum only below ``target``: placements of max load ``<= target`` must survive.

    In the ``"chain"`` formulation this adds :class:`~placement_dsl.blocks.chain.PositionWindows`;
    with an incumbent of value ``UB`` and ``target = UB / (1 + gap)`` the optimum is certified
    within ``gap`` by ``min(target, bound)``. Other formulations ignore it (it restricts nothing).
    """

    target: float = math.inf

    def __post_init__(self) -> None:
        if not self.target > 0:
            raise SpecError(f"LoadTarget(target={self.target!r}): the target must be a positive max load")

    def templates(self, formulation: str) -> list[TemplateRef]:
        if formulation == "chain" and math.isfinite(self.target):
            return [PositionWindows(self.target)]
        return []


def chain(problem: Problem) -> list[Step]:
    """CPU gaps (row 2), cumulative slots (row 1), forward DAG order (rows 3-4), tensor cut (row 5),
    the problem's loads, memory, pins and max-load objective (row 6), ancestor cuts (row 7) and,
    with a :class:`LoadTarget`, position windows (row 8)."""
    if isinstance(problem.objective, GPipe):
        raise SpecError("chain formulation: the ancestor cuts bound the max load; GPipe's sum of two maxima "
                        "needs formulation='throughput'")
    own = [Step(CpuGaps()), Step(ChainAssignment()), Step(ChainOrder()), Step(ChainTensorCut()),
           Step(AncestorCuts())]
    terms = [s for s in term_steps(problem, "chain") if s.template.name not in REPLACED]
    return [*own, *terms]


def chain_problem(problem: Problem, target: float) -> Problem:
    """``problem`` with a :class:`LoadTarget` (replacing any earlier one)."""
    kept = [t for t in problem.constraints if not isinstance(t, LoadTarget)]
    return Problem(problem.source_graph, problem.cluster, problem.objective, [*kept, LoadTarget(target)])


def certified_bound(problem: Problem, bound: float | None, infeasible: bool = False) -> float | None:
    """``min(T*, bound)`` with the problem's :class:`LoadTarget` ``T*`` (the bound alone without one).

    ``bound`` is the solver's bound of the windowed model in cost-model units. A windowed model
    proved ``infeasible`` certifies ``T*``; without a bound and without that proof (e.g. a time
    limit before any bound) nothing is certified (``None``).

    Examples
    --------
    >>> from placement_dsl.problem import Stages
    >>> from placement_dsl.graph import Graph, Op
    >>> p = chain_problem(Problem(Graph([Op(name="a", work=1)], []), Stages(1)), 2.0)
    >>> certified_bound(p, 3.0), certified_bound(p, 1.5), certified_bound(p, None, infeasible=True)
    (2.0, 1.5, 2.0)
    >>> certified_bound(p, None) is None
    True
    """
    targets = [t.target for t in problem.find(LoadTarget)]
    if not targets:
        return bound
    floor = min(targets)
    if bound is None:
        return floor if infeasible else None
    return min(floor, bound)
