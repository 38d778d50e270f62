"""Deprecated home of :mod:`placement_dsl.report` (moved below the cost model, which formats its tables with it)."""
from .. import report as _report
from ..deprecated import moved, public

__getattr__ = moved(__name__, public(_report))
