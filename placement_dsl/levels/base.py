"""The certificate's levels: one registration per level, saying which problems it bounds and where it runs.

A level is a function ``run_level(run, seconds) -> (bound, status, note, class)`` that reads the
certification's running state ``run`` (its problem, best placement, best bound, solver, deadline;
see :mod:`placement_dsl.certify`) and returns the bound it proved, how it ended, a note and the
class of placements the bound holds for. It registers by name::

    from placement_dsl.levels.base import Family, level

    @level("mine", rank=35, defaults={Family.MTPP})
    def mine(run, seconds): ...

``rank`` is its place in the hierarchy (levels run cheapest first, in rank order, whatever order
they were asked in); ``defaults`` the problem families (:class:`Family`) whose default hierarchy
it joins; ``accepts(problem)`` says why it does not bound a problem (``None``: it does). The other
flags are :class:`Level`'s. :func:`load` imports every module of this package, so a new level is
one module here; a level defined elsewhere registers when its module is imported.
"""
from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..certificate import LevelStatus
from ..constraints import AllowedKinds, Colocate, Congestion, Contiguous, DagOrder, Memory, Overflow, Pin
from ..deadline import MIN_SEARCH, PLACEMENT_NONZEROS, Deadline, model_seconds, slowdown
from ..errors import PlacementError, SpecError
from ..evaluate import execution
from ..objectives import Bottleneck, Latency, PipeDream, Throughput
from ..placement import PlacementClass
from ..plugins import import_modules
from ..problem import Problem

ALL, DAG_ORDERED, DP_CLASS = PlacementClass.ALL, PlacementClass.DAG_ORDERED, PlacementClass.DP
Outcome = tuple[float | None, LevelStatus, str, PlacementClass]
Run = Any  # the certification's running state (placement_dsl.certify's runner), which sits above the levels


class Family(enum.Enum):
    """The problem families whose default hierarchies differ (:func:`family`)."""

    LATENCY = "latency"              # single-sample latency, accelerators running invocations (Tarnawski §4)
    MAKESPAN = "makespan"            # single-sample latency, devices running one op at a time (MOIRAI §III)
    MTPP = "mtpp"                    # DAG-ordered, Archer's MIP writes it (Archer et al. §3, §5)
    ROUTED_MTPP = "routed-mtpp"      # DAG-ordered on a routed cluster: Archer's cut prices per device
    THROUGHPUT = "throughput"        # Tarnawski's contiguous throughput problems
    NONCONTIGUOUS = "noncontiguous"  # Tarnawski's problems without structure terms


ARCHER_TERMS: frozenset[type] = frozenset({Bottleneck, Throughput, PipeDream, DagOrder, Contiguous, Memory, Overflow,
                                           Colocate, Pin, AllowedKinds, Congestion})
"""The terms whose rules in Archer's exact MIP (the base table: max load, memory, overflow, order, contiguity,
colocation, pins; kinds and congestion dropped) list templates that refuse no problem but a routed cluster's (the
tensor cut prices transfers per device): declared here so that picking a family needs no Pyomo."""


def archer_surely_writes(problem: Problem) -> bool:
    """Whether ``problem`` is one Archer's exact MIP is declared to write (:data:`ARCHER_TERMS`, a max-load objective,
    a cluster without routes), answered without importing the formulation; ``False`` means: ask it."""
    return (not problem.cluster.routed and problem.objective.bounds_max_load
            and all(type(t) in ARCHER_TERMS for t in problem.terms))


def archer_writes(problem: Problem) -> bool:
    """Whether Archer's exact MIP writes ``problem`` (not on a routed cluster): by its declaration
    (:func:`archer_surely_writes`), else by asking the formulation (whose blocks import Pyomo)."""
    if archer_surely_writes(problem):
        return True
    from ..formulations import get

    return get("exact").accepts(problem) is None


def family(problem: Problem) -> Family:
    """The family of ``problem``: latency or makespan by its objective, else by DagOrder (and whether Archer's MIP writes
    it) and Contiguous."""
    if isinstance(problem.objective, Latency):  # one single-sample family (Makespan is its alias): by how devices run
        return Family.LATENCY if execution(problem.cluster) == "invocations" else Family.MAKESPAN
    if problem.has(DagOrder):
        return Family.MTPP if archer_writes(problem) else Family.ROUTED_MTPP
    return Family.THROUGHPUT if problem.has(Contiguous) else Family.NONCONTIGUOUS


def widened(problem: Problem) -> str | None:
    """Why no level bounds ``problem``: a term that widens the placements (``widens = True``, e.g.
    :class:`~placement_dsl.training_terms.Replicate`) makes the levels' bounds, which ignore it, no bounds."""
    wide = [type(t).__name__ for t in problem.constraints if getattr(t, "widens", False)]
    return f"{', '.join(wide)} widens the placements beyond what the levels bound" if wide else None


_FAMILY_TUPLES = {"MTPP_LEVELS": Family.MTPP, "ROUTED_MTPP_LEVELS": Family.ROUTED_MTPP,
                  "THROUGHPUT_LEVELS": Family.THROUGHPUT, "NONCONTIG_LEVELS": Family.NONCONTIGUOUS,
                  "LATENCY_LEVELS": Family.LATENCY, "MAKESPAN_LEVELS": Family.MAKESPAN}


def family_tuple(module: str, name: str) -> tuple[str, ...]:
    """``module``'s old per-family tuple ``name`` (``MTPP_LEVELS``, ...), read from the levels' ``defaults``
    (deprecated: a module's ``__getattr__``); :class:`AttributeError` for any other name."""
    if name in _FAMILY_TUPLES:
        warnings.warn(f"{module}.{name} is deprecated; use default_levels(problem) or "
                      f"placement_dsl.levels.base.defaults_of(Family.{_FAMILY_TUPLES[name].name})",
                      DeprecationWarning, stacklevel=2)
        return defaults_of(_FAMILY_TUPLES[name])
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Level:
    """One rung of the bound hierarchy, registered once in :data:`LEVELS` (run in ``rank`` order).

    ``run(run, seconds)`` returns the bound, how the level ended, a note, and the class of
    placements the bound holds for; ``accepts(problem)`` is ``None`` when the level bounds the
    problem, else the reason (the row then reads not applicable). ``closed_form`` levels are not
    counted in the MIP levels' shares and may take half of what is left (they stop, or are stopped,
    by it); an ``always`` level runs even after the gap target is met; a
    ``free`` one (a closed form of milliseconds, ranked first) before the upper-bound heuristics (which cannot take
    its time) and even after the budget is spent, while the call's time holds its passes over the graph
    (:meth:`late`; ``per_edge``: their seconds per op and edge). ``needs(run)`` estimates the seconds
    a MIP level's model takes to build (``None``: not known); a level whose model cannot be built in all that is left
    takes no share from the levels before it.
    A ``replicates`` level also bounds problems with a :class:`~placement_dsl.training_terms.Replicate`
    term (replicated stages, App. C.2); the others read not applicable there. A MIP level's share
    of what is left is its ``weight`` over the weights of the MIP levels still to run. ``rank`` is its
    place in the run order (cheapest first); ``defaults`` the families whose default hierarchy it joins.

    What a level can still add: ``reach(run)`` estimates from above the most its bound can be given the run so far
    (``None``: the best objective, as for any bound), and ``precision`` is the relative gap it proves to (a MIP
    level's gap, a bisection's width; ``0`` for an exact computation). Where the certificate's gap is within that
    (``min(reach, best) - bound <= precision * best``) the level cannot change the certificate, and is skipped.
    """

    name: str
    run: Callable[[Run, float], Outcome]
    accepts: Callable[[Problem], str | None] = lambda problem: None
    closed_form: bool = False
    always: bool = False
    free: bool = False
    doc: str = ""
    replicates: bool = False
    weight: float = 1.0
    rank: float = 0.0
    defaults: frozenset[Family] = frozenset()
    reach: Callable[[Run], float | None] | None = None
    precision: float = 0.0
    needs: Callable[[Run], float] | None = None
    per_edge: float | None = None

    def fits(self, run: Run, left: float) -> bool:
        """Whether its model may be built and searched in ``left`` seconds (``needs``, estimated once per
        certification in ``run.needs``; a level that does not say, or cannot write the problem, is counted)."""
        if self.needs is None:
            return True
        if self.name not in run.needs:
            try:
                run.needs[self.name] = float(self.needs(run))
            except (PlacementError, SpecError):  # the level cannot write the problem: it says so when it runs
                run.needs[self.name] = 0.0
        return run.needs[self.name] + MIN_SEARCH <= left

    def too_large(self, run: Run, seconds: float) -> str | None:
        """Why its model cannot be built and searched in ``seconds`` (``None``: it may, or the level does not say),
        from ``needs`` alone: a level skipped for its size loads no formulation (Pyomo's import took 0.5-1.1 s of a
        ``bounds`` of 20,000 ops whose MIP levels were all too large)."""
        if self.fits(run, seconds):
            return None
        return (f"model too large for the time left: the {self.name!r} level's model takes ~{run.needs[self.name]:.0f} "
                f"s to build, {max(seconds, 0.0):.1f} s left; not built")

    def late_seconds(self, problem: Problem) -> float:
        """Its passes' estimated seconds here now: ``per_edge`` (else :data:`FREE_PER_EDGE`) per op and edge."""
        g = problem.graph
        return (self.per_edge or FREE_PER_EDGE) * (g.n + g.m) * slowdown()

    def late(self, problem: Problem, deadline: Deadline, allowance: float = 0.0) -> bool:
        """Whether it runs once the levels' budget is spent: a ``free`` level whose passes over the graph
        (:meth:`late_seconds`) fit ``allowance`` (what is left of :data:`FREE_SECONDS`) or what is left of the call
        (``deadline``)."""
        return self.free and self.late_seconds(problem) <= max(allowance, deadline.left())

    def beyond_reach(self, best: float, bound: float, run: Run) -> str | None:
        """Why the level cannot change a certificate of objective ``best`` and bound ``bound`` (``None``: it may):
        the most its bound can be (``reach``, at most ``best``) exceeds ``bound`` by no more than its
        ``precision``. With a gap target of 0 the MIP levels ran for minutes to close gaps of 5e-7 left by the
        cut-stages bisection (GPT-3, 2,044 ops onto 4 stages: 46 s), and stage-cut cut ops for 25 s whose cheapest
        stages could not beat the bound."""
        if not math.isfinite(best) or best <= 0 or (self.reach is None and self.precision <= 0):
            return None
        reach = None if self.reach is None else self.reach(run)
        most = best if reach is None else min(best, reach)
        if most - bound > self.precision * best:
            return None
        if most < best:
            return f"its bound is at most {most:.6g} (an estimate), not above the bound {bound:.6g}"
        return f"the gap {(best - bound) / best:.2g} is within the {self.precision:g} the level proves to"


FREE_PER_EDGE = 3e-5  # seconds per op or edge of a free level's passes at deadline.LOAD_MEASURED (route-path: 2.8 s
# on 47,584 ops and 65,222 edges at load 8 on 2 cores; segment-path spent 4.7 s before its first check of the clock)
FREE_SECONDS = 0.3  # what the free levels estimated to take it run past the budget together: start-up and the
# heuristics took all of a 4 s bounds of 1,502 ops at load 14, and simple (0.05 s), capacity (0.001 s), critical-path
# (0.13 s) and route-path (0.21 s) were skipped for bound 0

LEVELS: dict[str, Level] = {}
"""Every registered level by name, in rank order (complete after :func:`load`)."""

_loaded: list[bool] = [False]


def placement_mip_needs(run: Run) -> float:
    """A placement MIP level's ``needs`` (Archer's and Tarnawski's models and their relaxations): the sizing's
    estimate of its build (:data:`~placement_dsl.deadline.PLACEMENT_NONZEROS` per op or edge and device), without
    loading Pyomo. Without it certify held time for the MIP levels of a 20,000-op GPT-3 that then skipped (~393 s to
    build) while slicegraph, stopped twice by shorter shares, never finished its split (gap 12.6 % where it needs
    ~25 s)."""
    g = run.problem.graph
    return model_seconds(PLACEMENT_NONZEROS * (g.n + g.m) * run.problem.cluster.size)


def register(lv: Level) -> Level:
    """Add ``lv`` to :data:`LEVELS` in its rank's place; a name taken by another level's function is refused."""
    if not isinstance(lv.name, str) or not lv.name:
        raise SpecError(f"level name {lv.name!r}: give a non-empty string")
    old = LEVELS.get(lv.name)
    if old is not None and _where(old.run) != _where(lv.run):
        raise SpecError(f"level {lv.name!r} is already registered by {_where(old.run)}; {_where(lv.run)} needs "
                        "another name")
    LEVELS[lv.name] = lv
    ranked = sorted(LEVELS.values(), key=lambda x: x.rank)
    LEVELS.clear()
    LEVELS.update((x.name, x) for x in ranked)
    return lv


def _where(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def level(name: str, *, rank: float, defaults: Iterable[Family] = (),
          accepts: Callable[[Problem], str | None] | None = None, closed_form: bool = False, always: bool = False,
          free: bool = False, replicates: bool = False, weight: float = 1.0,
          reach: Callable[[Run], float | None] | None = None, precision: float = 0.0,
          needs: Callable[[Run], float] | None = None, per_edge: float | None = None,
          doc: str = "") -> Callable[[Callable[[Run, float], Outcome]], Callable[[Run, float], Outcome]]:
    """Register the decorated function as the level ``name`` (returned unchanged); see :class:`Level`."""
    defaults = frozenset(defaults)
    if not all(isinstance(f, Family) for f in defaults):
        raise SpecError(f"level {name!r}: defaults {sorted(map(str, defaults))} must be Family members")

    def add(fn: Callable[[Run, float], Outcome]) -> Callable[[Run, float], Outcome]:
        first = (fn.__doc__ or "").strip().split("\n")[0]
        register(Level(name, fn, accepts or (lambda problem: None), closed_form, always, free, doc or first,
                       replicates, weight, float(rank), defaults, reach, float(precision), needs, per_edge))
        return fn
    return add


def load() -> dict[str, Level]:
    """Import every module of this package once, so that its levels are registered; the registry."""
    if not _loaded[0]:
        import_modules(__package__)
        _loaded[0] = True
    return LEVELS


def default_levels(problem: Problem) -> tuple[str, ...]:
    """The levels whose ``defaults`` hold the problem's :func:`family`, in rank order."""
    fam = family(problem)
    return tuple(name for name, lv in load().items() if fam in lv.defaults)


def checked_levels(problem: Problem, levels: tuple[str, ...] | list[str] | None) -> list[str]:
    """The requested level names (or the problem's default hierarchy) in run order; unknown names refused."""
    levels = default_levels(problem) if levels is None else tuple(levels)
    known = load()
    unknown = sorted(set(levels) - set(known))
    if unknown:
        raise SpecError(f"certify: unknown level(s) {unknown}; choose from {list(known)}")
    return [name for name in known if name in levels]


def defaults_of(fam: Family) -> tuple[str, ...]:
    """The default hierarchy of the family ``fam``, in rank order."""
    return tuple(name for name, lv in load().items() if fam in lv.defaults)


# ---------------------------------------------------------------------------- what several levels ask
def dp_class_is_dag_order(problem: Problem) -> bool:
    """Identical stages, no host devices, an inference graph, under DagOrder: the DP is exact.

    An acyclic quotient numbered in DAG order makes every prefix of stages an ideal, so a
    DAG-ordered placement is a chain of ideals (Tarnawski Fact 5.2) — the DP's search space —
    and conversely; stages being identical, the numbering costs nothing.
    """
    c = problem.cluster
    return (problem.has(DagOrder) and not problem.graph.is_training and not c.host.any()
            and len(c.homogeneous_groups()) == 1)


ANY_ORDER = "in any device order"
"""What a row's class adds to its name where DAG order depends on the numbering (:func:`numbered`): the problem's
class, and the levels that read the order (Archer's MIP), number the devices as the cluster lists them
(:meth:`~placement_dsl.problem.Problem.class_label` names that order); the DP over ideals tries every order of the
device classes, its optimum that of a wider class."""


def numbered(problem: Problem) -> bool:
    """Whether the problem's DAG order depends on how the devices are numbered
    (:attr:`~placement_dsl.problem.Problem.numbered`)."""
    return problem.numbered


def own_class(run: Run, scope: PlacementClass) -> PlacementClass:
    """``scope`` as a level that bounds only the problem's own placements returns it: where that is the problem's
    class, the run is told (``run.own``) so that a problem whose restriction its class does not show (``Subgraphs(q)``,
    whose class reads all placements) does not count the bound as one over its whole family."""
    if scope == run.scope:
        run.own = True
    return scope


def tarnawski(problem: Problem) -> str | None:
    """Tarnawski's problems, and DAG-ordered ones Archer's MIP cannot write (a routed cluster: its rows hold DAG
    order too)."""
    if problem.has(DagOrder) and archer_writes(problem):
        return "bounds Tarnawski's problems (no DagOrder); use 'exact'"
    return None


def not_latency(problem: Problem) -> str | None:
    """Lemma 3.3's sum term needs devices that run one op at a time; the latency model's hosts do not."""
    return ("a max-load bound: single-sample latency has its own levels (critical-path, run-paths, latency-lp, "
            "latency)" if isinstance(problem.objective, Latency) else None)


def latency_only(problem: Problem) -> str | None:
    """The latency levels bound single-sample latency only."""
    return None if isinstance(problem.objective, Latency) and family(problem) is Family.LATENCY else \
        "bounds single-sample latency in the invocation model (accelerators that run invocations)"


VECTOR_PER_EDGE = 1e-6  # per_edge of the free levels of a few numpy passes (simple: 0.05 s, capacity 0.001 s, on
# 1,502 ops and 3,000 edges at load 14)
PATH_PER_EDGE = 1e-5  # ... of one pass in topological order (critical-path 0.13 s, route-path 0.21 s, there)
