"""Loading a registry's plugins: every module of a package, imported by dotted name once.

Heuristics (:mod:`placement_dsl.heuristics.registry`), certify levels (:mod:`placement_dsl.levels.base`) and
input formats (:mod:`placement_dsl.io.formats`) register themselves when their modules are imported; each
registry's ``load()`` calls :func:`import_modules` on its package, so a new method, level or format is one module.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def import_modules(package: str | ModuleType) -> ModuleType:
    """Import ``package`` and every module directly inside it (their registrations run); the package."""
    pkg = importlib.import_module(package) if isinstance(package, str) else package
    for info in pkgutil.iter_modules(getattr(pkg, "__path__", [])):
        importlib.import_module(f"{pkg.__name__}.{info.name}")
    return pkg
