"""The options each of the package's heuristics declares, as :class:`~placement_dsl.options.Options` models.

A method names its model where it registers (``@heuristic("brkga", optimizes="max_load", options=Brkga)``);
:func:`placement_dsl.heuristics.run` checks what a caller passes against it, and the command line's
``--option NAME=VALUE`` and ``placement-dsl methods`` read it. The models live here, away from the methods'
numba kernels, so that listing them imports nothing heavy. Defaults are the functions' own (a test holds them
equal); the common arguments (``model``, ``seed``, ``time_limit``) are every method's and not options.
"""
from __future__ import annotations

from typing import Any

from ..options import Options, option

# ---------------------------------------------------------------------------- shared pieces
REPLICATION = "replicate a stage over several identical devices (Tarnawski App. C.2)"
MAX_REPLICAS = "the most devices a replicated stage runs on (None: as many as fit)"
EVALUATIONS = "placements the search evaluates before it stops"


class Pins(Options):
    """List schedulers that keep given ops on given devices."""

    pins: Any = option(None, "op name -> device name: where those ops must run")


class Replicated(Options):
    """Pipelines that may replicate stages."""

    replication: bool = option(False, REPLICATION)
    max_replicas: int | None = option(None, MAX_REPLICAS, ge=1)


class Slicegraph(Replicated):
    order: Any = option(None, "a topological order of the ops to slice (None: the method's own)")
    priorities: Any = option(None, "a priority per op that orders the slices (None: the method's own)")


class DpServers(Options):
    max_ideals: int | None = option(None, "the most ideals the DP takes (None: as many as it can finish in the "
                                    "time left, or in ten minutes without a time limit)", ge=1)


class Random(Options):
    evaluations: int = option(1000, EVALUATIONS, ge=1)


class Mla(Random):
    population: int = option(100, "chromosomes per generation", ge=2)
    elite: float = option(0.2, "share of a generation kept as elite", gt=0, lt=1)
    mutants: float = option(0.15, "share of a generation drawn afresh", ge=0, lt=1)
    rho: float = option(0.7, "chance a child takes an elite parent's gene", gt=0, lt=1)


class Brkga(Mla):
    initial: Any = option(None, "orders (lists of op indices) to seed the first generation with")


class Dpl(Replicated):
    merge_zero_cost: bool = option(True, "contract ops of no cost into a neighbour before the DP")


class Dp(Dpl):
    max_ideals: int = option(2_000_000, "the most ideals the DP enumerates before it declines", ge=1)
    incumbent: bool = option(True, "prune the walk with the best split found so far")


class LatencySearch(Options):
    """The latency local search's knobs, which latency-best passes on to it."""

    restarts: int = option(50, "restarts from perturbed starts", ge=0)
    kicks: int = option(8, "random moves per restart", ge=0)
    max_evaluations: int = option(1_000_000, "latency evaluations before the search stops", ge=1)
    dp_max_ideals: int = option(5000, "the ideals of the max-load DP start; larger lattices use DPL", ge=1)
    also: Any = option(None, "(name, assignment) splits descended from first, before the starts")


class LatencyLocalSearch(LatencySearch):
    starts: Any = option(None, "placements to start from (None: greedy and the max-load DP's split)")


class LocalSearch(Options):
    restarts: int = option(10, "restarts from perturbed starts", ge=0)
    max_moves: int = option(100_000, "moves per restart before it stops", ge=1)
    seeded: bool = option(True, "the first restart descends from greedy's or SliceGraph's split (False: every "
                               "restart from a random split, Tarnawski §6's baseline)")


class Pipeline(Replicated):
    upper_bound: float | None = option(None, "a max load known to be reachable, which prunes the search", gt=0)


class Polish(Options):
    start: Any = option(None, "the placement to polish (None: the DP's split)")
    kicks: int = option(300, "random perturbations between descents", ge=0)
    max_block: int = option(12, "the most ops one move carries", ge=1)


class ScheduleStart(Options):
    start: Any = option("list", "a heuristic name or placement to start from")


class Nothing(Options):
    """A method that takes no options beyond the common ones."""
