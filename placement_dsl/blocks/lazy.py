"""Pyomo's modelling namespaces, loaded when a template first builds a model, not when it is imported.

The formulations are declared from the block templates, and :func:`placement_dsl.solve.solve` consults them (which
formulation, whether it accepts the problem, its estimated build) before it knows whether a model will be built:
a solve whose budget is spent before the build, and every heuristic's path, answer without Pyomo (seconds of
start-up under load). ``pyo`` stands for ``pyomo.environ`` and ``gdp`` for ``pyomo.gdp``; the first attribute read
imports the module.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class Deferred(ModuleType):
    """A module imported on its first attribute read (then every read is the module's own)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # introspection (doctest, copy, pickle) does not load the module
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self.__name__)
        return getattr(self._module, attr)


pyo: Any = Deferred("pyomo.environ")
gdp: Any = Deferred("pyomo.gdp")
