"""A new formulation inheriting a table: Archer's y-variables with Tarnawski's cut.

Run: python examples/custom_formulation.py
"""
from placement_dsl.blocks import OrderedAssignment, TensorCut
from placement_dsl.formulations import get, register
from placement_dsl.solve import solve
from placement_dsl.testing import fork_join


def ordered_commio(problem):
    """Archer Fig. 3's ``y`` (eq. 11-12) with Tarnawski's CommIn/CommOut rows (Fig. 6 eq. 15-19)."""
    return [OrderedAssignment(), TensorCut(form="commio")]


# the exact formulation's rule table (objectives, memory, DAG order, ...) with another skeleton
if "ordered_commio" not in __import__("placement_dsl.formulations", fromlist=["FORMULATIONS"]).FORMULATIONS:
    register(get("exact").derive("ordered_commio", skeleton=ordered_commio, doc=ordered_commio.__doc__))

if __name__ == "__main__":
    problem, optimum = fork_join()
    for name in ("exact", "ordered_commio"):
        result = solve(problem, formulation=name, time_limit=10)
        print(f"{name:15s} {result.status.value} objective {result.objective} (known optimum {optimum})")
        assert abs(result.objective - optimum) < 1e-6
