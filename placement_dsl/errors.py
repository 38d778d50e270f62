"""Exception hierarchy of the package.

Every error names the offending object (op, edge, device, option), shows the value
and, where one exists, says how to fix it.
"""
from __future__ import annotations


class PlacementError(Exception):
    """Base class of every error raised by placement_dsl."""


class SpecError(PlacementError, ValueError):
    """Invalid input: a graph, cluster, placement, problem or option that cannot be used."""


class InfeasibleError(PlacementError):
    """The problem has no feasible placement (e.g. memory cannot hold the ops)."""


class SolverUnavailableError(PlacementError):
    """The requested solver is unknown or not installed."""


class EvaluationMismatchError(PlacementError):
    """A solver's objective disagrees with the independent cost model."""


def refuse_spawned_rerun(call: str) -> None:
    """End a child process that runs ``call`` while it re-runs the ``__main__`` script, with one line saying why.

    A child process started by ``spawn`` (as the MIP solvers' isolated children are) imports the parent's script
    again as ``__mp_main__`` before its work; a script without an ``if __name__ == "__main__":`` guard then runs
    its own calls once more in every child, which would start children of their own.
    """
    import sys

    multiprocessing = sys.modules.get("multiprocessing")  # a child process has it: it is what started the child
    # a spawned child's bootstrapping (multiprocessing.spawn's own test before it starts a child of its own)
    if multiprocessing is None or not getattr(multiprocessing.current_process(), "_inheriting", False):
        return
    rerun = sys.modules.get("__mp_main__")
    script = getattr(rerun, "__file__", None) or "the script"
    raise SystemExit(f"error: {call} was called again while a child process re-imported {script!r}; put the script's "
                     f"calls under 'if __name__ == \"__main__\":' (child processes import the main script)")
