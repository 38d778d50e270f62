"""Helpers every importer and writer shares: number checks, the one strict JSON encoder, and reading with the cycle
collector paused."""
from __future__ import annotations

import gc
import json
import math
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from pathlib import PurePath
from typing import Any

import numpy as np

from ..limits import amount


def nonnegative(value: Any, where: str, unlimited: bool = False) -> float:
    """Deprecated: :func:`placement_dsl.limits.amount`, the one check of a cost for readers and constructors."""
    warnings.warn("placement_dsl.io.common.nonnegative moved to placement_dsl.limits.amount; import it from there "
                  "(the old name goes in the next release)", DeprecationWarning, stacklevel=2)
    return amount(value, where, unlimited)


def jsonable(value: Any, finite: bool = True) -> Any:
    """``value`` as plain JSON types: numpy arrays -> lists, numpy scalars -> Python, enums -> their value.

    With ``finite`` (the default) ``inf``/``nan`` become ``None`` so that strict JSON (no
    ``Infinity``/``NaN``) can always be written. Mappings, sequences and sets are converted
    recursively (sets sorted); objects with a ``to_dict`` method are converted through it; any
    other object raises :class:`TypeError` naming its type.

    >>> import numpy as np
    >>> jsonable({"a": np.arange(2), "b": np.float64("inf"), 3: {np.int64(1)}})
    {'a': [0, 1], 'b': None, 3: [1]}
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Enum):
        return jsonable(value.value, finite)
    if isinstance(value, (int, float, np.generic)):
        return _scalar(value, finite)
    return _container(value, finite)


def _container(value: Any, finite: bool) -> Any:
    """:func:`jsonable` of arrays, mappings, sequences, sets, paths and objects with ``to_dict``."""
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist(), finite)
    if isinstance(value, Mapping):
        return {_key(k): jsonable(v, finite) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [jsonable(v, finite) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [jsonable(v, finite) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if callable(getattr(value, "to_dict", None)):
        return jsonable(value.to_dict(), finite)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON: {value!r:.80}")


def _scalar(value: Any, finite: bool) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and finite and not math.isfinite(value):
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return jsonable(value, finite)


def _key(key: Any) -> Any:
    """A mapping key JSON accepts: strings and Python numbers as they are, anything else as text."""
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, Enum):
        key = key.value
    return key if isinstance(key, (str, int, float, bool)) or key is None else str(key)


def dumps_strict(value: Any, **options: Any) -> str:
    """Standard JSON text of ``value`` (see :func:`jsonable`); never ``NaN`` or ``Infinity``.

    >>> dumps_strict({"x": float("nan"), "y": [1.5]})
    '{"x": null, "y": [1.5]}'
    """
    return json.dumps(jsonable(value), allow_nan=False, **options)


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
