"""The heuristics' registry: each method registers itself where it is defined, with what it optimizes.

A method is a function ``fn(graph, cluster, *, model, seed, time_limit, **options) -> HeuristicResult``
that, given a time limit, returns its best placement so far when it runs out. It registers by name::

    from placement_dsl.heuristics.registry import heuristic

    @heuristic("mine", optimizes="max_load", options=MineOptions)
    def mine(graph, cluster, *, model=None, seed=None, time_limit=None, depth=3): ...

``options`` is the :class:`~placement_dsl.options.Options` model of the method's own keyword options
(:mod:`.manifest` holds the package's); :func:`~placement_dsl.heuristics.run` checks what a caller passes against
it. A method that declares none takes its keywords unchecked.

:func:`load` imports the modules that hold the package's own methods (every module of this
package, and of the packages named in :data:`PLUGIN_PACKAGES`, found by walking them and imported
by dotted name, so that a method defined above this layer registers without this module importing
upwards); a method defined elsewhere registers when its module is imported. A plugin package whose
modules are costly to import (the search package loads Pyomo) declares its methods instead, in a
``HEURISTICS`` table of its ``__init__`` (``{name: ("module:function", optimizes, options)}``, modules relative to
the package): :func:`load` reads the table without importing the modules, and a method's module is
imported when the method is first run, so listing the methods (``--help``) stays cheap. This package's own
methods are declared the same way in :data:`DECLARED` (their modules compile numba kernels): :func:`names` and
:func:`get` read the declarations (:func:`declare`) and import only the module of the method that runs. ``optimizes`` says
what the method minimizes when it searches: an objective (``"max_load"``, ``"latency"``,
``"makespan"``, ``"gpipe"``), ``"cost_model"`` (picks by the model it is given) or
``"memory_fill"`` (looks at memory only). A method that answers only some cost models' objectives declares them
(``serves``, the table's optional fourth entry): :func:`~placement_dsl.heuristics.run` refuses another objective by
:meth:`Heuristic.refuse` before the method's module is imported (the searches' load Pyomo and CP-SAT: 10 s under load
for a one-line refusal); a method without one answers every objective, its answer priced by the model it is given.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SpecError
from ..evaluate import Objective, execution
from ..options import Options, describe, validate
from ..plugins import import_modules
from . import manifest

PLUGIN_PACKAGES: list[str] = [__package__, "placement_dsl.search"]
"""Packages whose modules :func:`load` imports (a missing one is skipped); append a package to add its methods."""


@dataclass(frozen=True)
class Heuristic:
    """A registered method: its name, function (or, declared by a plugin package, ``"module:function"``
    imported on first use), what it optimizes, the module that defines it, its declared options
    (``None``: undeclared, passed unchecked) and the cost models' objectives it answers (``None``: every one)."""

    name: str
    target: Callable[..., Any] | str
    optimizes: str
    module: str
    doc: str = ""
    options: type[Options] | None = None
    serves: tuple[str, ...] | None = None

    def refuse(self, objective: str) -> None:
        """A :class:`SpecError` when the method does not answer a cost model's ``objective`` (e.g. ``"max_load"``)."""
        if self.serves is not None and objective not in self.serves:
            raise SpecError(f"{self.name} searches {' and '.join(self.serves)}; the cost model's objective is "
                            f"{objective!r}")

    def check(self, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` checked against the declared options (:func:`placement_dsl.options.validate`); undeclared
        options pass as given."""
        return dict(given) if self.options is None else validate(f"heuristic {self.name!r}", self.options, given)

    def describe(self) -> list[Any]:
        """The declared options (:class:`placement_dsl.options.OptionInfo`), in order."""
        return describe(self.options)

    @property
    def fn(self) -> Callable[..., Any]:
        """The method's function (its module imported now when it was declared by name)."""
        return self.target if not isinstance(self.target, str) else imported(self.target)

    @property
    def where(self) -> str:
        """``module:function`` of the method, without importing a declared one."""
        return self.target if isinstance(self.target, str) else f"{self.module}:{self.target.__qualname__}"


def imported(target: str) -> Callable[..., Any]:
    """The function named by ``target`` (``"module:function"``, the module's full name), its module imported now."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


FALLBACK = f"{__package__}.fallback:fallback"
"""The split a method answers when its time limit passed before it held a valid one (:func:`.fallback.fallback`: the
best of the ``O(n + m)`` splits), named, not imported: its splits are built by methods (greedy, one device,
SliceGraph's slicing) whose modules import :mod:`.base`, whose :func:`~.base.run` falls back to it as the methods do.
:func:`fallback` imports it on use, as :attr:`Heuristic.fn` does a declared method's module."""


def fallback() -> Callable[..., Any]:
    """The function of :data:`FALLBACK`: ``fallback(method, graph, cluster, model, phase, start)``."""
    return imported(FALLBACK)


HEURISTICS: dict[str, Heuristic] = {}
"""Every registered method by name (complete after :func:`load`; after :func:`declare`, this package's methods and
the plugin packages' declared ones are there by name, their modules not yet imported)."""

_loaded: list[bool] = [False]

DECLARED: dict[str, tuple[str, str, str]] = {
    "greedy": ("baselines:greedy", "memory_fill", "Nothing"),
    "one-device": ("baselines:one_device", "cost_model", "Nothing"),
    "list": ("listsched:heft", "makespan", "Nothing"),
    "one-device-best": ("listsched:one_device_best", "makespan", "Nothing"),
    "getf": ("etf:getf", "makespan", "Pins"),
    "m-sct": ("etf:m_sct", "makespan", "Pins"),
    "slicegraph": ("slicegraph:slicegraph", "max_load", "Slicegraph"),
    "gpipe-split": ("gpipe_split:gpipe_split", "gpipe", "Nothing"),
    "dp-servers": ("ideal_servers:dp_servers", "max_load", "DpServers"),
    "random": ("orderings:random_orders", "max_load", "Random"),
    "brkga": ("orderings:brkga", "max_load", "Brkga"),
    "mla": ("orderings:mla", "max_load", "Mla"),
    "mla-weighted": ("orderings:mla_weighted", "max_load", "Mla"),
    "dp": ("ideals:dp", "max_load", "Dp"),
    "dpl": ("ideals:dpl", "max_load", "Dpl"),
    "latency-local-search": ("latency:latency_local_search", "latency", "LatencyLocalSearch"),
    "latency-best": ("latency:latency_best", "latency", "LatencySearch"),
    "pipedream": ("level_path:pipedream_path", "max_load", "Nothing"),
    "local-search": ("local_search:local_search", "cost_model", "LocalSearch"),
    "pipedream-planner": ("pipedream_planner:pipedream_planner", "max_load", "Replicated"),
    "pipeline": ("pipeline:pipeline", "max_load", "Pipeline"),
    "polish": ("polish:polish", "max_load", "Polish"),
    "cpop": ("schedule_ls:cpop", "makespan", "Nothing"),
    "schedule-ls": ("schedule_ls:schedule_local_search", "makespan", "ScheduleStart"),
}
"""This package's methods as ``{name: ("module:function", optimizes, options)}`` (modules relative to the package,
``options`` the name of the method's model in :mod:`.manifest`), in the order :func:`load` registers them: :func:`names` lists them without importing their modules (which compile numba
kernels), so the command line's ``--help`` stays cheap. Each module's ``@heuristic`` decorator is the registration;
``tests/heuristics/test_heuristics_registry.py`` checks that this table says the same."""


def heuristic(name: str, *, optimizes: str, doc: str = "",
              options: type[Options] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the method ``name`` (returned unchanged), with its declared ``options``.

    A name registered by another function is refused (:class:`SpecError`); registering the same
    function again (its module reloaded) replaces the entry.
    """
    if not isinstance(name, str) or not name:
        raise SpecError(f"heuristic name {name!r}: give a non-empty string")
    if not isinstance(optimizes, str) or not optimizes:
        raise SpecError(f"heuristic {name!r}: optimizes {optimizes!r} must name what the method minimizes")
    if options is not None and not (isinstance(options, type) and issubclass(options, Options)):
        raise SpecError(f"heuristic {name!r}: options {options!r} must be an Options model (placement_dsl.options)")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        old = HEURISTICS.get(name)
        where = f"{fn.__module__}:{fn.__qualname__}"
        if old is not None and old.where != where:
            raise SpecError(f"heuristic {name!r} is already registered by {old.where}; {where} needs another name")
        first = (fn.__doc__ or "").strip().split("\n")[0]
        declared = options if options is not None or old is None else old.options  # a plugin's manifest declared them
        serves = None if old is None else old.serves  # as its options: declared in the manifest
        HEURISTICS[name] = Heuristic(name, fn, optimizes, fn.__module__, doc or first, declared, serves)
        return fn
    return register


def _add_declared(package: str, table: dict[str, tuple[Any, ...]]) -> None:
    """Enter ``table``'s methods (``{name: ("module:function", optimizes[, options[, serves]])}``, modules relative
    to ``package``; ``options`` an :class:`~placement_dsl.options.Options` model or the name of one in
    :mod:`.manifest`, ``serves`` the objectives the method answers) by name; a method already registered keeps its
    entry."""
    for name, (target, goal, *declared) in table.items():
        module, _, attr = target.partition(":")
        full = f"{package}.{module}"
        serves = tuple(declared[1]) if len(declared) > 1 else None
        if name in HEURISTICS and HEURISTICS[name].serves is None and serves is not None:  # its module came first
            HEURISTICS[name] = dataclasses.replace(HEURISTICS[name], serves=serves)
        if name not in HEURISTICS:
            options = declared[0] if declared else None
            if isinstance(options, str):  # a model of .manifest (no kernels)
                options = getattr(manifest, options)
            HEURISTICS[name] = Heuristic(name, f"{full}:{attr}", goal, full, options=options, serves=serves)


def _plugins(import_all: bool) -> None:
    """The plugin packages' methods: a package's ``HEURISTICS`` table when it declares one, else (``import_all``, or
    a package without a table) its modules imported. This package's own modules only when ``import_all``."""
    for package in PLUGIN_PACKAGES:
        if package == __package__:
            if import_all:
                import_modules(package)
            continue
        try:
            pkg = importlib.import_module(package)
        except ModuleNotFoundError as err:
            if err.name is not None and package.startswith(err.name):
                continue  # the package is not there
            raise
        declared = getattr(pkg, "HEURISTICS", None)
        if isinstance(declared, dict):  # a plugin's manifest: its modules are imported when a method runs
            _add_declared(package, declared)
        else:
            import_modules(pkg)


def _declared_order() -> dict[str, Heuristic]:
    """The registry in :data:`DECLARED`'s order, other methods after in the order they registered: a module imported
    before the table was entered (its decorator registering first) no longer moves its method up the listings."""
    rank = {name: i for i, name in enumerate(DECLARED)}
    entries = sorted(HEURISTICS.items(), key=lambda item: rank.get(item[0], len(rank)))
    HEURISTICS.clear()
    HEURISTICS.update(entries)
    return HEURISTICS


def declare() -> dict[str, Heuristic]:
    """Every method by name without importing the modules that define them (:data:`DECLARED`, the plugin packages'
    tables; a plugin package without one is imported); the registry, whose declared entries import their module
    when their function is asked for (:attr:`Heuristic.fn`)."""
    if not _loaded[0]:
        _add_declared(__package__, DECLARED)
        _plugins(import_all=False)
        _declared_order()
    return HEURISTICS


def load() -> dict[str, Heuristic]:
    """Import every module of :data:`PLUGIN_PACKAGES` once, so that their methods are registered; the registry."""
    if not _loaded[0]:
        declare()  # the declared order first: the decorators replace the entries in place
        _plugins(import_all=True)
        _loaded[0] = True
        _declared_order()
    return HEURISTICS


def names() -> list[str]:
    """The method names, in registration order, without importing the modules that define them (:func:`declare`)."""
    return list(declare())


def get(name: str) -> Heuristic:
    """The registered method ``name``; :class:`SpecError` naming the choices when there is none."""
    found = (declare().get(name) or load().get(name)) if isinstance(name, str) else None
    if found is None:
        raise SpecError(f"unknown heuristic {name!r}; choose from {sorted(HEURISTICS)}")
    return found


def optimizes(name: str, default: str | None = None) -> str | None:
    """What the method ``name`` minimizes (``default`` for a name not registered), from its declaration."""
    found = declare().get(name) or load().get(name)
    return found.optimizes if found is not None else default


def methods_for(objective: str) -> list[str]:
    """The methods that search for ``objective`` (e.g. ``"max_load"``): its own, and those that take the model's."""
    return [h.name for h in load().values() if h.optimizes in (objective, "cost_model", "memory_fill")]


def goal(model: Any, cluster: Any) -> str:
    """What a heuristic searches for under the cost model ``model`` on ``cluster`` (the ``optimizes`` of the methods
    that search for it): the objective's name, and for the single-sample objective (``latency`` or its alias
    ``makespan``) how the cluster's devices run (:func:`~placement_dsl.evaluate.execution`): Tarnawski's invocations
    are the latency methods' model, one op at a time the list schedulers' (MOIRAI)."""
    if model.objective in (Objective.LATENCY, Objective.MAKESPAN):
        return "latency" if execution(cluster) == "invocations" else "makespan"
    return model.objective.value
