"""The ranges every input is held to, so that no sum over a graph or cluster overflows.

Costs (times, bytes) are finite numbers >= 0 whose totals over a graph stay at or below
:data:`MAX_TOTAL`: far beyond any real model (a trillion-parameter model holds about 1e13
bytes), and below the value (1e20) at which the MIP solvers read a coefficient as
infinite, so that loads, makespans and big-M constants stay finite and exact enough.
A cluster has at most :data:`MAX_DEVICES` devices: the route matrices are ``D x D`` and
the formulations have a variable per op and device, so a larger count is refused before
anything is allocated.

>>> total_ok(1e18), total_ok(1e19), total_ok(float("inf"))
(True, False, False)
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import SpecError

MAX_TOTAL = 1e18
MAX_DEVICES = 4096


def total_ok(value: float) -> bool:
    """Whether ``value`` is a finite number within ``[0, MAX_TOTAL]``."""
    return math.isfinite(value) and 0 <= value <= MAX_TOTAL


def count(value: Any, where: str, low: int = 0, high: int = MAX_DEVICES) -> int:
    """``value`` as an integer in ``[low, high]`` (``True``/``False`` and ``2.7`` are not counts), else a
    :class:`SpecError` naming ``where`` and the value.

    >>> count(3, "maxFPGAs"), count(2.0, "maxFPGAs")
    (3, 2)
    >>> count(2.7, "maxFPGAs")
    Traceback (most recent call last):
    ...
    placement_dsl.errors.SpecError: maxFPGAs: 2.7 is not a whole number
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise SpecError(f"{where}: {value!r:.40} is not a whole number")
    if not isinstance(value, Integral) and not float(value).is_integer():
        raise SpecError(f"{where}: {value!r} is not a whole number")
    if not low <= value <= high:
        raise SpecError(f"{where}: {value!r:.40} is out of range; give a whole number from {low} to {high}")
    return int(value)


def first_error(err: ValidationError) -> str:
    """The first problem pydantic found, on one line: ``field: message``."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "value"
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


class FieldError(SpecError):
    """A :class:`Validated` model refused a field; ``detail`` is ``field: message`` without the object's name."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class Validated(BaseModel):
    """A pydantic model whose constructor (and ``model_validate``) raises :class:`SpecError`, one line
    naming the object and the field, instead of pydantic's multi-line :class:`ValidationError`."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            name = data.get("name", data.get("src", "?"))
            detail = first_error(err)
            raise FieldError(f"{type(self).__name__.lower()} {name!r:.80}: {detail}", detail) from None


def construct(model: type[Validated], item: Any, what: str, position: int) -> Any:
    """``item`` (a ``model`` or a mapping of its fields) as a ``model``; errors name ``what`` by its name,
    else by its ``position`` in the list it came from."""
    if isinstance(item, model):
        return item
    if not isinstance(item, Mapping):
        raise SpecError(f"{what} #{position}: expected a mapping of its fields, got {type(item).__name__} "
                        f"{item!r:.40}")
    data = {str(k): v for k, v in item.items()}
    try:
        return model(**data)
    except FieldError as err:  # named again: by its position when it has no name
        name = data.get("name", data.get("src", f"#{position}"))
        raise SpecError(f"{what} {name!r:.80}: {err.detail}") from None
