"""HiGHS as a plain LP library, without Pyomo: for the heuristics and bounds that solve one small LP
(m-SCT's favourite children), and the solver backend's constructor."""
from __future__ import annotations

import os
import sys
from typing import Any


def available() -> bool:
    """Whether ``highspy`` imports."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def new_highs(verbose: bool = False) -> Any:
    """A ``highspy.Highs`` that has printed nothing unless ``verbose`` (set ``output_flag`` next).

    From highspy 1.16 the constructor itself prints HiGHS's banner (it enables the callbacks, which
    logs the header), before any option such as ``output_flag`` can be set: standard output is sent
    to the null device while it runs.
    """
    import highspy

    if verbose:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return h
