"""Formulations as objects: a kind, a class of placements, a skeleton, and the table from term types to templates.

A :class:`Formulation` is registered once by name (:func:`register`), like a Pyomo
transformation in its factory, and owns the rules that turn each problem term into block
templates, like a cvxpy reduction owns ``CANON_METHODS``: a term never learns a
formulation's name. A formulation may inherit its parent's table and override entries
(:meth:`Formulation.derive`); a term with no rule is a :class:`SpecError` naming both.

>>> from placement_dsl.constraints import Memory
>>> from placement_dsl.formulations import get
>>> get("throughput").rule_for(Memory()) is not None
True
"""
from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import starts
from ..blocks.base import BlockTemplate
from ..constraints import Term
from ..errors import SpecError
from ..heuristics import methods_for
from ..objectives import ObjectiveTerm
from ..options import Options
from ..placement import PlacementClass
from ..problem import Problem

if TYPE_CHECKING:
    from ..deadline import Deadline
    from ..evaluate import Evaluation
    from ..placement import Placement
    from ..result import Result

Rule = Callable[[Any, Problem], Sequence[BlockTemplate]]


class Refused(SpecError):
    """A formulation's refusal of a problem, whose message names the formulation: :meth:`Formulation.steps` raises
    every refusal as one (a rule's or template's :class:`SpecError` gains the name there)."""

    def __init__(self, formulation: str, reason: str):
        super().__init__(f"formulation {formulation!r}: {reason}")
        self.formulation = formulation


class Kind(enum.Enum):
    """What a formulation's optimum means for the problem."""

    EXACT = "exact"              # its optimum is the problem's optimum
    RESTRICTION = "restriction"  # optimizes over a subclass: incumbents are feasible, bounds hold for the subclass
    RELAXATION = "relaxation"    # its optimum is a lower bound; its solution is not a placement


@dataclass(frozen=True)
class Step:
    """Build ``template`` into a block; ``term`` is the problem term it realizes (None for the skeleton)."""

    template: BlockTemplate
    term: Any = None


def drop(term: Any, problem: Problem) -> list[BlockTemplate]:
    """The rule of a term a formulation needs no block for (folded into the data, or implied).

    A term that *widens* the placements (``widens = True``, e.g. ``Replicate``) cannot be dropped:
    the formulation would then hold for fewer placements than the problem allows."""
    if getattr(term, "widens", False):
        raise SpecError(f"{term!r} widens the placements; this formulation cannot drop it and has no rule for it")
    return []


@dataclass(frozen=True)
class Auto:
    """When ``formulation="auto"`` picks a formulation, declared on it: the candidates of the highest
    ``rank`` come first (the first registered on a tie), and a candidate is picked when the problem has
    every term type in ``requires`` and, if ``checked``, the formulation accepts the problem
    (:meth:`Formulation.accepts`). An :class:`ObjectiveFormulation` also needs the problem's objective
    to be its own. A formulation without one is never picked by ``"auto"``."""

    rank: int = 0
    requires: tuple[type, ...] = ()
    checked: bool = False


@dataclass
class Plan:
    """What a formulation's :meth:`~Formulation.prepare` hook decided for one solve.

    ``problem`` is compiled (the input problem, or one with extra terms such as a load
    target); ``pass_start`` says whether the warm start goes to the solver as a MIP start
    (otherwise it is only kept as the fallback answer); ``info`` is for :meth:`~Formulation.finish`;
    ``cutoff`` (cost-model units) lets the solver prune every node whose bound reaches it, when
    only placements below it matter (:attr:`~placement_dsl.solvers.base.SolveOptions.cutoff`).
    """

    problem: Problem
    pass_start: bool = True
    info: dict[str, Any] = field(default_factory=dict)
    cutoff: float | None = None


class Formulation:
    """A formulation: kind, class of placements, skeleton templates, rule table, and solve hooks.

    Parameters
    ----------
    name
        The registered name (``solve(formulation=name)``).
    kind
        :class:`Kind`.
    skeleton
        ``problem -> [template, ...]``: the formulation's own blocks (assignment, cut, ...).
    rules
        ``{term type: rule}``; ``rule(term, problem) -> [template, ...]``. Looked up along the
        term's class hierarchy, own entries first, then the parent's.
    parent
        A formulation whose table this one inherits.
    transformation
        A Pyomo transformation applied to the built model (``"gdp.bigm"``, ``"gdp.hull"``) when
        its templates write disjunctions.
    auto
        When ``formulation="auto"`` picks it (:class:`Auto`); ``None``: never (not inherited by
        :meth:`derive`).
    doc
        One paragraph: what the formulation is, citing the paper.
    """

    options: type[Options] | None = None
    """The formulation's own options (:mod:`placement_dsl.options`), checked by ``solve(..., options=...)``;
    ``None``: it takes none."""

    def __init__(self, name: str, kind: Kind, skeleton: Callable[[Problem], Sequence[BlockTemplate]],
                 rules: Mapping[type, Rule] | None = None, parent: Formulation | None = None, doc: str = "",
                 transformation: str | None = None, auto: Auto | None = None):
        self.name, self.kind, self.doc = name, kind, doc.strip()
        self.transformation = transformation
        self.auto = auto
        self._skeleton = skeleton
        self.rules: dict[type, Rule] = dict(rules or {})
        self.parent = parent

    # ------------------------------------------------------------------ the table
    def table(self) -> dict[type, Rule]:
        """The full rule table: the parent's entries overridden by this formulation's own."""
        return {**(self.parent.table() if self.parent else {}), **self.rules}

    def rule_for(self, term: Term) -> Rule:
        """The rule for ``term`` (by its class, then its base classes); :class:`SpecError` when none."""
        table = self.table()
        for cls in type(term).__mro__:
            if cls in table:
                return table[cls]
        known = sorted(c.__name__ for c in table)
        raise Refused(self.name, f"no rule for term {type(term).__name__} ({term!r}); it has rules for {known}. "
                                 f"Add one: get({self.name!r}).add_rule({type(term).__name__}, rule)")

    def add_rule(self, term_type: type, rule: Rule) -> Rule:
        """Add (or override) the rule for ``term_type``; usable as a decorator argument pair."""
        self.rules[term_type] = rule
        return rule

    def derive(self, name: str, kind: Kind | None = None,
               skeleton: Callable[[Problem], Sequence[BlockTemplate]] | None = None,
               rules: Mapping[type, Rule] | None = None, doc: str = "", cls: type[Formulation] | None = None,
               **extra: Any) -> Formulation:
        """A new formulation inheriting this one's table (and, unless given, its kind and skeleton)."""
        maker = cls or Formulation
        extra.setdefault("transformation", self.transformation)
        return maker(name, kind or self.kind, skeleton or self._skeleton, rules, parent=self, doc=doc, **extra)

    # ------------------------------------------------------------------ what it builds
    def skeleton(self, problem: Problem) -> list[BlockTemplate]:
        return list(self._skeleton(problem))

    def steps(self, problem: Problem) -> list[Step]:
        """The skeleton, then each term's templates (one per distinct template, in term order).

        Every template checks that it can write ``problem`` (:meth:`BlockTemplate.check`). A refusal is a
        :class:`Refused` naming the formulation: a rule's or template's :class:`SpecError` is raised as one.
        """
        try:
            out = [Step(t) for t in self.skeleton(problem)]
            seen = {repr(s.template) for s in out}
            for term in problem.terms:
                for template in self.rule_for(term)(term, problem):
                    if repr(template) not in seen:
                        seen.add(repr(template))
                        out.append(Step(template, term))
            for step in out:
                step.template.check(problem)
        except Refused:
            raise
        except SpecError as err:
            raise Refused(self.name, str(err)) from err
        return out

    def accepts(self, problem: Problem) -> str | None:
        """``None`` when the formulation applies to ``problem``, else the reason it does not.

        Every term needs a rule, and every rule must accept its term (a rule raises
        :class:`SpecError` for a case it cannot write, e.g. the chain's GPipe).
        """
        try:
            self.steps(problem)
        except SpecError as err:
            return str(err)
        return None

    def chosen_for(self, problem: Problem) -> bool:
        """Whether ``formulation="auto"`` may pick this formulation for ``problem`` (its :class:`Auto`)."""
        auto = self.auto
        if auto is None or not all(problem.has(t) for t in auto.requires):
            return False
        return not auto.checked or self.accepts(problem) is None

    def placement_class(self, problem: Problem) -> PlacementClass:
        """The class of placements this formulation's optimum (exact), incumbents and bound (restriction)
        or bound (relaxation) hold for on ``problem``: by default the problem's own class."""
        return problem.placement_class()

    # ------------------------------------------------------------------ solve hooks
    def prepare(self, problem: Problem, start: Placement | None, start_eval: Evaluation | None, gap: float,
                options: Mapping[str, Any]) -> Plan:
        """Hook before the solve: the problem to compile and whether the start is a MIP start."""
        unknown = sorted(options)
        if unknown:
            raise SpecError(f"formulation {self.name!r} takes no options {unknown}")
        return Plan(problem)

    def with_floor(self, plan: Plan, deadline: Deadline) -> Plan:
        """Hook after :meth:`prepare`: the plan with a lower bound on the objective proven by ``deadline`` written
        into its model (so the solver's bound starts there and prunes by it), and in ``info`` as ``floor`` (cost-model
        units) with ``floor_source`` (what proved it); the default changes nothing."""
        return plan

    def finish(self, result: Result, plan: Plan) -> None:
        """Hook after the solve (e.g. a restriction's certificate); the default changes nothing."""

    def __repr__(self) -> str:
        parent = f", parent={self.parent.name!r}" if self.parent else ""
        return f"Formulation({self.name!r}, {self.kind.value}{parent})"


class ObjectiveFormulation(Formulation):
    """A formulation of one objective type (:attr:`objective`): it refuses problems with another,
    any other objective term gets a rule that says so, and ``formulation="auto"`` picks it for
    its own (:meth:`chosen_for`, ahead of the formulations of no objective: :data:`OBJECTIVE_RANK`).
    :attr:`minimizes` words the objective in messages."""

    objective: type = object
    minimizes: str = ""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("auto", Auto(rank=OBJECTIVE_RANK))
        super().__init__(*args, **kwargs)
        self.rules.setdefault(ObjectiveTerm, self._other_objective)

    def _other_objective(self, term: Term, problem: Problem) -> list[BlockTemplate]:
        raise Refused(self.name, f"it minimizes {self.minimizes}, not {type(term).__name__}; use formulation='auto' for it")

    def steps(self, problem: Problem) -> list[Step]:
        """Refuses a problem of another objective type before any rule runs: a rule inherited from the base table
        may accept an objective term derived from one it knows (GPipe from Throughput) and write a model of
        another objective."""
        if not isinstance(problem.objective, self.objective):
            raise Refused(self.name, f"it minimizes {self.minimizes}; the problem's objective is "
                                     f"{type(problem.objective).__name__}")
        return super().steps(problem)

    def chosen_for(self, problem: Problem) -> bool:
        """``formulation="auto"`` picks this formulation for its own objective."""
        return isinstance(problem.objective, self.objective) and super().chosen_for(problem)


OBJECTIVE_RANK = 3
"""The :class:`Auto` rank of an :class:`ObjectiveFormulation`: its own objective comes before any other choice."""


def choose(problem: Problem) -> str:
    """``formulation="auto"``: the first registered exact formulation, highest :class:`Auto` rank first, that
    declares itself chosen for ``problem`` (:meth:`Formulation.chosen_for`)."""
    ranked = sorted((f for f in FORMULATIONS.values() if f.kind is Kind.EXACT and f.auto is not None),
                    key=lambda f: -f.auto.rank)
    for form in ranked:
        if form.chosen_for(problem):
            return form.name
    raise SpecError(f"formulation 'auto': no registered formulation is chosen for a problem with terms "
                    f"{[type(t).__name__ for t in problem.terms]}; name one of {sorted(FORMULATIONS)}")


def unwritten(problem: Problem) -> str | None:
    """Why no IP solves ``problem`` when its objective is the reason: no registered formulation (exact or a
    restriction) accepts the objective on the problem's graph and cluster without the constraint terms; the
    message names the methods that answer the objective (:func:`placement_dsl.heuristics.methods_for`, by its
    name and by the cost model's objective). ``None`` when some formulation writes the objective.

    >>> from placement_dsl.cluster import Cluster
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.objectives import GPipe
    >>> g = Graph([Op(name="a", work=1.0), Op(name="b", work=2.0, backward=True)], [("a", "b")])
    >>> print(unwritten(Problem(g, Cluster.stages(2), GPipe(microbatches=4))))  # doctest: +ELLIPSIS
    no IP writes objective 'gpipe' with microbatches=4 on this graph and cluster (no registered formulation accepts it); the methods that answer it: greedy, ...
    """
    bare = Problem(problem.source_graph, problem.cluster, problem.objective)
    if any(f.kind is not Kind.RELAXATION and f.accepts(bare) is None for f in FORMULATIONS.values()):
        return None
    term = problem.objective
    m = getattr(term, "microbatches", None)
    label = repr(term.names[0]) + (f" with microbatches={m}" if m is not None else "")
    methods = list(dict.fromkeys([*methods_for(term.names[0]), *methods_for(problem.cost_model().objective.value)]))
    return (f"no IP writes objective {label} on this graph and cluster (no registered formulation accepts it); the "
            "methods that answer it: "
            f"{', '.join(methods)} (placement_dsl.heuristics.run(NAME, ...); on the command line --method NAME)")


def valid_heuristic(problem: Problem, method: str) -> tuple[Placement, float] | None:
    """Heuristic ``method``'s placement and objective when the placement is valid for ``problem`` (a
    horizon for a formulation's big-Ms and its fallback answer), else ``None``
    (:func:`placement_dsl.starts.resolve`)."""
    found = starts.resolve(problem, method)
    if not found.usable or not math.isfinite(found.objective):
        return None
    return found.placement, found.objective


FORMULATIONS: dict[str, Formulation] = {}


def register(formulation: Formulation) -> Formulation:
    """Make ``formulation`` available by its name; a name registered twice is an error."""
    if formulation.name in FORMULATIONS and FORMULATIONS[formulation.name] is not formulation:
        raise SpecError(f"formulation {formulation.name!r} is already registered")
    FORMULATIONS[formulation.name] = formulation
    return formulation


def get(name: str | Formulation, problem: Problem | None = None) -> Formulation:
    """The formulation object for ``name`` (``"auto"``: the problem's default); objects pass through."""
    if isinstance(name, Formulation):
        return name
    if name == "auto":
        if problem is None:
            raise SpecError("formulation 'auto' chooses by the problem; pass the problem")
        name = choose(problem)
    if name not in FORMULATIONS:
        raise SpecError(f"unknown formulation {name!r}; choose from {['auto', *sorted(FORMULATIONS)]}")
    return FORMULATIONS[name]


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def check_horizon(hint: Any, what: str) -> None:
    """A hint's ``horizon`` is a known ``what`` (latency, makespan) of some placement: 0 or more (0 when nothing
    takes time), or infinite; anything else (negative, NaN) is refused, naming the hint."""
    if not hint.horizon >= 0:
        raise SpecError(f"{type(hint).__name__}(horizon={hint.horizon!r}): the horizon must be a {what}, 0 or more")
