"""Formulations: registered objects composing block templates, each owning its rule table.

A :class:`Formulation` has a kind (exact, restriction, relaxation), the class of placements
its optimum or bound holds for, a skeleton of its own templates and a table from problem
term types to templates. Authoring one means composing templates and inheriting a table::

    from placement_dsl.formulations import Formulation, Kind, get, register

    mine = register(get("throughput").derive("mine", rules={MyTerm: my_rule}))

``solve(problem, formulation="mine")`` then finds it by name; :func:`get` resolves a name once
into the object, and nothing below that compares names.
"""
from __future__ import annotations

from .base import (
    FORMULATIONS,
    Auto,
    Formulation,
    Kind,
    ObjectiveFormulation,
    Plan,
    Refused,
    Rule,
    Step,
    choose,
    drop,
    get,
    register,
)
from .chain import CHAIN, LoadTarget
from .exact import EXACT
from .latency import LATENCY
from .relaxations import RELAXATIONS, GuessedBlock
from .replication import THROUGHPUT_REPLICATED
from .rules import BASE, BASE_RULES
from .schedule import SCHEDULE
from .throughput import THROUGHPUT


def of_kind(kind: Kind) -> dict[str, Formulation]:
    """The registered formulations of one kind, by name."""
    return {name: f for name, f in FORMULATIONS.items() if f.kind is kind}


__all__ = ["BASE", "BASE_RULES", "CHAIN", "EXACT", "FORMULATIONS", "LATENCY", "RELAXATIONS", "SCHEDULE", "THROUGHPUT",
           "THROUGHPUT_REPLICATED", "Auto", "Formulation", "GuessedBlock", "Kind", "LoadTarget", "ObjectiveFormulation",
           "Plan", "Refused", "Rule", "Step",
           "choose", "drop", "get", "of_kind", "register"]
