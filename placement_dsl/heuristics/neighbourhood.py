"""Deprecated: moved to :mod:`placement_dsl.search.neighbourhood` (it re-solves with :func:`~placement_dsl.solve.solve`, which
sits above the heuristics). The old names are kept for one release, with a :class:`DeprecationWarning`."""
from __future__ import annotations

from ..deprecated import moved

__getattr__ = moved(__name__, "placement_dsl.search.neighbourhood")
