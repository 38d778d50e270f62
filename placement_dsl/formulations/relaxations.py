"""Relaxations of Archer et al.'s exact MIP (ICML 2024, Fig. 3): their optima are lower bounds on OPT.

Each builder composes the superblock templates of :mod:`placement_dsl.blocks.superblock`
with the exact formulation's tensor-cut, overflow and load templates. The models have
``3n`` assignment variables and ``O(m)`` constraints whatever ``k`` is (Corollary 3.4).

Two settings:

* **Archer's** — a DAG-ordered MTPP (``DagOrder``) on identical stages (``Cluster.stages``):
  ordered superblocks with the DAG constraints (8); the bounds hold over DAG-ordered placements.
* **Tarnawski's throughput setting** (NeurIPS 2020, §5.1) — ``k`` identical accelerators and
  any CPUs (host devices, no transfers), with or without ``Contiguous``, inference or
  training (PipeDream ``max_d FW_d + BW_d``), hard or soft memory; also any DAG-ordered
  problem whose cluster has CPUs. :class:`~placement_dsl.blocks.superblock.HostSuperblocks`:
  the accelerators merge into unordered superblocks, each CPU stays a device, tensors are cut
  by Tarnawski's eq. (15)-(19). There is no DAG order to keep (with CPUs an edge may leave
  a later accelerator for a CPU and come back to an earlier one), so these bounds hold over
  **all** placements, hence over contiguous and DAG-ordered ones too. ``superblock`` and
  ``no-dag`` coincide there.

A model whose solve stops at a time limit still proves its dual bound, which is then a
lower bound on the relaxation's optimum and hence on OPT. A relaxation's placement
(three superblocks) is not a placement of the problem: solve these models with
:func:`placement_dsl.solvers.solve_model` (as :mod:`placement_dsl.certify` does), not with
:func:`placement_dsl.solve.solve`, which reads placements back.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..blocks import BlockTemplate, DagOrderBlock, DeviceLoad, MemoryCapacity, OverflowCost, TensorCut
from ..blocks.superblock import HostSuperblocks, NoTransfer, SuperblockLoad, Superblocks, accelerators_of, stages_of
from ..constraints import Colocate, DagOrder, Memory, Overflow, Term
from ..errors import SpecError
from ..evaluate import Overlap
from ..objectives import ObjectiveTerm
from ..placement import PlacementClass
from ..problem import Problem
from .base import Formulation, Kind, Refused, Rule, drop, register
from .rules import colocate


@dataclass(frozen=True)
class GuessedBlock(Term):
    """The guess of Archer §3.3: stage ``j`` (1-based) holds at least Lemma 3.3's ``L`` units of work.

    A modelling term for the ``guess`` formulation; it constrains nothing a placement can see
    (some stage always holds ``L``), so the cost model ignores it.
    """

    j: int = 1

    def validate(self, graph: object, cluster: object) -> None:
        size = getattr(cluster, "size", 0)
        if not 1 <= self.j <= size:
            raise SpecError(f"GuessedBlock(j={self.j}): j must lie in 1..k = 1..{size}")


def unordered(problem: Problem) -> bool:
    """Tarnawski's setting: no ``DagOrder``, or CPUs in the cluster (the bound then covers all placements)."""
    return not problem.has(DagOrder) or bool(problem.cluster.host.any())


def _checked(problem: Problem, name: str) -> int:
    """``k``: the stages (Archer's setting) or the accelerators (Tarnawski's), else :class:`SpecError`."""
    if not problem.objective.bounds_max_load:
        raise Refused(name, f"it bounds the max device load; objective {problem.objective!r} is not one (use "
                            "Bottleneck(), Throughput() or PipeDream())")
    if unordered(problem):
        return len(accelerators_of(problem.cluster)[0])
    return stages_of(problem.cluster)


def _unordered_steps(problem: Problem, blocks: tuple[int | None, int | None], cut: BlockTemplate,
                     weights: tuple[float, float, float]) -> list[BlockTemplate]:
    """Tarnawski's setting: :class:`HostSuperblocks`, no DAG constraints, CPUs' loads in the objective."""
    return [HostSuperblocks(blocks), *_cost_steps(problem, cut, SuperblockLoad(weights))]


def _cost_steps(problem: Problem, cut: BlockTemplate, objective: SuperblockLoad) -> list[BlockTemplate]:
    """Cut, load and objective; the memory, overflow and colocation terms add their own templates
    (:data:`RELAXED_RULES`).

    A superblock of ``s`` stages gets ``s`` stages' memory: a hard capacity then holds for it
    whenever it holds stage by stage, and its overflow is at most the sum of its stages'.
    """
    return [cut, DeviceLoad(), objective]


def _archer_cut(problem: Problem) -> TensorCut:
    return TensorCut(form="archer", merged=problem.objective.overlap is not Overlap.FULL)


def superblock(problem: Problem) -> list[BlockTemplate]:
    """Archer §3.2, the three-superblock MIP ("bottleneck" in Table 1): Fig. 3 with ``k = 3``, eq. (14), ``min block_2``.

    ``minimize block_middle`` subject to (8)-(12) over three superblocks and
    ``sum_v work(v) x_{v,middle} >= L`` (14). Valid: in any DAG-ordered partition some block
    ``b`` holds ``>= L`` work (Lemma 3.3); putting the blocks before ``b`` in ``first`` and those
    after it in ``last`` is feasible, and the middle block's cost (work, tensors entering
    from earlier blocks and leaving to later ones, overflow) is exactly ``b``'s cost, at most
    the partition's bottleneck. Hence the optimum is ``<= OPT`` (Corollary 3.4).

    Tarnawski's setting (accelerators + CPUs; see the module): ``minimize bottleneck`` with
    ``bottleneck >= load(middle)`` and ``>= load(c)`` for every CPU ``c``, the middle holding at
    least the accelerators' average work and every accelerator op's work. Valid over **all**
    placements: the placement's accelerator of most work as ``middle``, the other
    accelerators merged into ``first``, the CPUs as themselves is feasible, and each costed
    device's load is a load of the placement (the middle's transfers are exactly its
    tensors crossing its boundary, CPUs pay none), so the optimum is ``<= OPT``.
    """
    _checked(problem, "superblock")
    if unordered(problem):
        return _unordered_steps(problem, (None, None), TensorCut(form="commio"), (0.0, 1.0, 0.0))
    return [Superblocks(), DagOrderBlock(),
            *_cost_steps(problem, _archer_cut(problem), SuperblockLoad((0.0, 1.0, 0.0)))]


def guess(problem: Problem) -> list[BlockTemplate]:
    """Archer §3.3, "guess the bottleneck block" LB_j for the guess in the problem's :class:`GuessedBlock`.

    The superblock MIP with ``first`` = stages ``1..j-1`` and ``last`` = stages ``j+1..k``, and
    ``bottleneck >= block_middle``, ``bottleneck >= block_first / (j-1)``,
    ``bottleneck >= block_last / (k-j)`` (a superblock of zero stages is empty); ``block_first``
    and ``block_last`` count the superblock's work, the tensors crossing its boundary once, and
    the overflow beyond ``s`` stages' memory. Valid: for a partition whose stage ``j`` holds
    ``>= L`` work, the merged assignment is feasible; the sum of ``s`` stages' costs is at least
    the superblock's (tensors cut inside it are dropped, a tensor entering several of its
    stages is counted once, and ``sum_b max(0, mem_b - M) >= max(0, sum_b mem_b - sM)``), and
    the worst stage is at least the average, part by part of the load. So ``LB_j <= OPT`` for
    that ``j`` and ``min_j LB_j <= OPT``.

    Tarnawski's setting (see the module): ``k`` counts accelerators; ``first`` has ``j - 1`` of
    them and ``last`` ``k - j``, each with that many accelerators' memory and at most that many
    times the middle's work; the objective adds every CPU's load. Valid over **all**
    placements for **every** ``j``: with ``middle`` the accelerator of most work, any ``j - 1``
    other accelerators in ``first`` and the rest in ``last`` is feasible, and the averages are
    at most the worst accelerator's load. Hence ``LB_j <= OPT`` for each ``j`` (so
    ``max_j LB_j`` is a bound too; :func:`~placement_dsl.certify.guess_bound` reports the
    smaller ``min_j``).
    """
    k = _checked(problem, "guess")
    guesses = problem.find(GuessedBlock)
    if len(guesses) != 1:
        raise Refused("guess", "it builds LB_j for one guess: add exactly one GuessedBlock(j) term "
                               f"(found {len(guesses)}); certify() runs every j in 1..{k}")
    j = guesses[0].j
    if j > k:
        raise SpecError(f"GuessedBlock(j={j}): j must lie in 1..k = 1..{k} (the accelerators)")
    weights = (1.0 / (j - 1) if j > 1 else 0.0, 1.0, 1.0 / (k - j) if j < k else 0.0)
    if unordered(problem):
        return _unordered_steps(problem, (j - 1, k - j), TensorCut(form="commio"), weights)
    return [Superblocks((j - 1, k - j)), DagOrderBlock(),
            *_cost_steps(problem, _archer_cut(problem), SuperblockLoad(weights))]


def no_dag(problem: Problem) -> list[BlockTemplate]:
    """MLSys draft, "bottleneck-no-dag": the three-superblock MIP without the DAG constraints (8).

    Dropping constraints only enlarges the feasible set. The cut rows (9)-(10) still charge
    every tensor that a DAG-ordered assignment cuts, so the §3.2 argument carries over and
    the optimum is at most the superblock optimum, hence ``<= OPT``.

    Tarnawski's setting: the ``superblock`` model itself (it has no DAG constraints), valid
    over all placements.
    """
    _checked(problem, "no-dag")
    if unordered(problem):
        return superblock(problem)
    return [Superblocks(), *_cost_steps(problem, _archer_cut(problem), SuperblockLoad((0.0, 1.0, 0.0)))]


def no_cut_io(problem: Problem) -> list[BlockTemplate]:
    """MLSys draft, "bottleneck-no-cut-io": the three-superblock MIP without tensor-cut costs.

    ``minimize work(middle) + overflow(middle)`` under (8), (11), (12), (14): every block cost
    drops its transfer terms, which are nonnegative, so the optimum is at most the superblock
    optimum, hence ``<= OPT``.

    Tarnawski's setting: the ``superblock`` model without transfers, valid over all placements
    for the same reason.
    """
    _checked(problem, "no-cut-io")
    if unordered(problem):
        return _unordered_steps(problem, (None, None), NoTransfer(), (0.0, 1.0, 0.0))
    return [Superblocks(), DagOrderBlock(),
            *_cost_steps(problem, NoTransfer(), SuperblockLoad((0.0, 1.0, 0.0)))]


class Relaxation(Formulation):
    """A relaxation of Archer's MIP: its optimum (or time-limited dual bound) is a lower bound on OPT.

    It bounds DAG-ordered placements in Archer's setting and all placements in Tarnawski's
    (:func:`unordered`); it accepts only max-load objectives on identical stages or accelerators.
    """

    def placement_class(self, problem: Problem) -> PlacementClass:
        return PlacementClass.ALL if unordered(problem) else PlacementClass.DAG_ORDERED

    def accepts(self, problem: Problem) -> str | None:
        try:
            _checked(problem, self.name)
        except SpecError as err:
            return str(err)
        return super().accepts(problem)


RELAXED_RULES: dict[type, Rule] = {
    Term: drop,  # dropping a constraint only enlarges the feasible set (e.g. Contiguous, GuessedBlock)
    ObjectiveTerm: drop,  # the skeleton costs the superblocks (DeviceLoad + SuperblockLoad)
    Memory: lambda term, problem: [MemoryCapacity()],
    Overflow: lambda term, problem: [OverflowCost()],
    Colocate: colocate,
}


def _relaxation(name: str, skeleton: Callable[[Problem], list[BlockTemplate]]) -> Formulation:
    return register(Relaxation(name, Kind.RELAXATION, skeleton, RELAXED_RULES, doc=skeleton.__doc__ or ""))


RELAXATIONS = {name: _relaxation(name, fn)
               for name, fn in (("superblock", superblock), ("guess", guess), ("no-dag", no_dag),
                                ("no-cut-io", no_cut_io))}
