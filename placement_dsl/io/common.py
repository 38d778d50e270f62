"""Helpers every importer shares."""
from __future__ import annotations

import math
from typing import Any

from ..errors import SpecError


def nonnegative(value: Any, where: str) -> float:
    """``value`` as a finite number >= 0, or a :class:`SpecError` naming ``where`` and the value."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{where}: {value!r} is not a number") from None
    if math.isnan(out) or math.isinf(out) or out < 0:
        raise SpecError(f"{where}: {value!r} must be a finite number >= 0")
    return out
