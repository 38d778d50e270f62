"""Moved to :mod:`placement_dsl.levels.latency`; this name is kept for one release (deprecated)."""
import warnings

from .levels.base import latency_only, not_latency  # noqa: F401
from .levels.latency import (  # noqa: F401
    chosen_formulation,
    critical_path,
    device_work,
    latency_host_memory,
    latency_ip,
    latency_lp,
    latency_upper,
    makespan_only,
    makespan_upper,
    route_path,
    run_paths,
    schedule_ip,
    schedule_lp,
    single_sample,
)

warnings.warn("placement_dsl.certify_latency is deprecated; use placement_dsl.levels.latency",
              DeprecationWarning, stacklevel=2)
