"""Lower bounds on the optimal objective: combinatorial bounds and relaxed formulations."""
from .combinatorial import chain_bound, chain_data, position_windows
from .simple import simple_lower_bound

__all__ = ["chain_bound", "chain_data", "position_windows", "simple_lower_bound"]
