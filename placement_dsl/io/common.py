"""Helpers every importer and writer shares: number checks, the one strict JSON encoder (:mod:`placement_dsl.files`'
:func:`~placement_dsl.files.jsonable` and :func:`~placement_dsl.files.dumps_strict`, named here too), and reading with
the cycle collector paused."""
from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..files import dumps_strict, jsonable
from ..limits import amount

__all__ = ["collector_paused", "dumps_strict", "jsonable", "nonnegative"]


def nonnegative(value: Any, where: str, unlimited: bool = False) -> float:
    """Deprecated: :func:`placement_dsl.limits.amount`, the one check of a cost for readers and constructors."""
    warnings.warn("placement_dsl.io.common.nonnegative moved to placement_dsl.limits.amount; import it from there "
                  "(the old name goes in the next release)", DeprecationWarning, stacklevel=2)
    return amount(value, where, unlimited)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused within the block (and restarted after, if it ran before): reading a workload
    allocates tens of thousands of records, lists and dicts that form no cycles, and each collection their
    allocations set off walks every one made so far (a third of the CPU of reading 20,000 ops: 0.33 s against
    0.22 s)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
