"""``python -m placement_dsl.heuristics.warm_kernels``: compile and cache the kernels that calls ran in Python.

Started in the background by :func:`.kernel_cache.compile_in_background` when a call with a time limit found the
cache cold; one at a time per cache folder (its lock). It compiles each kernel listed in
:func:`.kernel_cache.wanted_file` for the argument types it was called with (the kernels it calls compile with
it), watching the list while calls keep adding to it, and leaves once nothing new came for :data:`IDLE` seconds.
"""
from __future__ import annotations

import importlib
import json
import sys
import time
from typing import Any

import numpy as np

from . import jit, kernel_cache

IDLE = 5.0  # seconds without a new line before the process leaves
POLL = 0.5


def numba_type(spec: list[Any]) -> Any:
    """The numba type of an argument described by :func:`.kernel_cache.arg_type`."""
    import numba
    from numba.core import types

    kind = spec[0]
    if kind == "array":
        dtype, ndim, layout, writable = spec[1:]
        return types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout, readonly=not writable)
    if kind == "scalar":
        return numba.from_dtype(np.dtype(spec[1]))
    if kind == "bool":
        return types.boolean
    if kind == "none":
        return types.none
    return types.BaseTuple.from_types([numba_type(s) for s in spec[1]])


def compile_line(line: str) -> bool:
    """Compile the kernel of one line of the wanted list for its argument types; whether it compiled."""
    try:
        entry = json.loads(line)
        kernel = getattr(importlib.import_module(entry["module"]), entry["kernel"])
        jit.compile_all()
        dispatcher = kernel.dispatcher if isinstance(kernel, jit.Kernel) else kernel
        dispatcher.compile(tuple(numba_type(s) for s in entry["args"]))
    except Exception:  # noqa: BLE001 - a kernel that does not compile here compiles where it is first called
        return False
    return True


def warm(idle: float = IDLE) -> int:
    """Compile what the wanted list holds until it stays unchanged for ``idle`` seconds, then empty it (0); nothing
    when another process holds the lock (1)."""
    with kernel_cache.holding_lock() as mine:
        if not mine:
            return 1
        path = kernel_cache.wanted_file()
        done: set[str] = set()
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < idle:
            try:
                lines = [s for s in path.read_text().splitlines() if s.strip()]
            except OSError:
                lines = []
            new = [s for s in dict.fromkeys(lines) if s not in done]
            for line in new:
                done.add(line)
                compile_line(line)
            if new:
                quiet_since = time.monotonic()
            else:
                time.sleep(POLL)
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(warm())
