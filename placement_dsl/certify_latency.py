"""Moved to :mod:`placement_dsl.levels.latency`; this name is kept for one release (deprecated)."""
import warnings

from .levels.base import latency_only, not_latency  # noqa: F401
from .levels.latency import critical_path, latency_ip, latency_lp, latency_upper, run_paths  # noqa: F401

warnings.warn("placement_dsl.certify_latency is deprecated; use placement_dsl.levels.latency",
              DeprecationWarning, stacklevel=2)
