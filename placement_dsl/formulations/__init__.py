"""Formulations: short compositions of block templates, registered by name.

A builder takes a :class:`~placement_dsl.problem.Problem` and returns the list of
:class:`Step` (template, and the term it realizes) that :func:`placement_dsl.compile.compile`
builds in phase order. Authoring a formulation means composing templates::

    def my_formulation(problem):
        return [Step(Assignment()), Step(TensorCut()), *term_steps(problem, "my_formulation")]

    FORMULATIONS["mine"] = my_formulation
"""
from __future__ import annotations

from collections.abc import Callable

from ..constraints import DagOrder
from ..errors import SpecError
from ..problem import Problem
from .base import Step, term_steps
from .chain import chain
from .exact import exact
from .relaxations import RELAXATIONS, GuessedBlock
from .throughput import throughput

# formulations whose optimum is the problem's optimum
FORMULATIONS: dict[str, Callable[[Problem], list[Step]]] = {"exact": exact, "throughput": throughput}
# restrictions optimize over a subclass of the problem's placements: their incumbents are feasible
# (upper bounds) and their bounds hold for that subclass only. "chain" is the DP-over-ideals class:
# DAG-ordered contiguous splits with CPUs in gaps of the accelerator sequence (Tarnawski §5.1.1).
RESTRICTIONS: dict[str, Callable[[Problem], list[Step]]] = {"chain": chain}
# relaxations compile by name too, but their optima are lower bounds, not the problem's optima


def choose(problem: Problem) -> str:
    """``formulation="auto"``: Archer's exact MIP under DAG order, Tarnawski's throughput IP otherwise."""
    return "exact" if problem.has(DagOrder) else "throughput"


def get(name: str, problem: Problem) -> tuple[str, Callable[[Problem], list[Step]]]:
    """The builder for ``name`` (``"auto"`` chooses by the problem's terms)."""
    if name == "auto":
        name = choose(problem)
    builders = {**FORMULATIONS, **RESTRICTIONS, **RELAXATIONS}
    if name not in builders:
        raise SpecError(f"unknown formulation {name!r}; choose from {['auto', *sorted(builders)]}")
    return name, builders[name]


__all__ = ["FORMULATIONS", "RELAXATIONS", "RESTRICTIONS", "GuessedBlock", "Step", "choose", "exact", "get", "term_steps", "throughput"]
