"""Deprecated: moved to :mod:`placement_dsl.search.neighbourhood` (it re-solves with :func:`~placement_dsl.solve.solve`, which
sits above the heuristics). The old names are kept for one release, with a :class:`DeprecationWarning`."""
from __future__ import annotations

import importlib
import warnings
from typing import Any

MOVED_TO = "placement_dsl.search.neighbourhood"


def __getattr__(name: str) -> Any:
    found = getattr(importlib.import_module(MOVED_TO), name)  # AttributeError for a name it never had
    warnings.warn(f"{__name__}.{name} moved to {MOVED_TO}.{name}", DeprecationWarning, stacklevel=2)
    return found
