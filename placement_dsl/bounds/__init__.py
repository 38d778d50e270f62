"""Lower bounds on the optimal objective: combinatorial bounds and relaxed formulations."""
from .simple import simple_lower_bound

__all__ = ["simple_lower_bound"]
