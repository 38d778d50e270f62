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


# How a refused amount is worded: a constructor's field (``work['cpu'] must be ...``, raised as a ValueError that the
# pydantic model turns into its one-line SpecError) or a reader's cell (``node 3: mi: 'x' is not a number``).
FIELD = {"not_number": "{where} must be a number, got {value!r:.40}",
         "digits": "{where} must be at most {top:g}, got an integer of {digits} digits",
         "negative": "{where} must be a finite number >= 0, got {value!r}",
         "beyond": "{where} must be at most {top:g}, got {value!r}"}
CELL = {"not_number": "{where}: {value!r:.40} is not a number",
        "digits": "{where}: an integer of {digits} digits is beyond {top:g}",
        "negative": "{where}: {value!r} must be a finite number >= 0",
        "beyond": "{where}: {value!r} is beyond {top:g}; give it in a larger unit"}


def amount(value: Any, where: str, unlimited: bool = False, *, wording: Mapping[str, str] = CELL,
           error: type[Exception] = SpecError) -> float:
    """``value`` as a finite number in ``[0, MAX_TOTAL]`` (or ``inf`` when ``unlimited``), else ``error`` naming
    ``where`` and the value in ``wording`` (:data:`CELL` or :data:`FIELD`); ``True``/``False`` are not numbers.

    >>> amount("2.5", "mi"), amount(float("inf"), "maxSizePerFPGA", unlimited=True)
    (2.5, inf)
    >>> amount(-1, "node 3: mi")
    Traceback (most recent call last):
    ...
    placement_dsl.errors.SpecError: node 3: mi: -1 must be a finite number >= 0
    >>> amount(True, "work['cpu']", wording=FIELD, error=ValueError)
    Traceback (most recent call last):
    ...
    ValueError: work['cpu'] must be a number, got True
    """
    def refuse(key: str, **fields: Any) -> Exception:
        return error(wording[key].format(where=where, value=value, top=MAX_TOTAL, **fields))

    if isinstance(value, bool):
        raise refuse("not_number")
    try:
        out = float(value)
    except OverflowError:
        raise refuse("digits", digits=len(str(value))) from None
    except (TypeError, ValueError):
        raise refuse("not_number") from None
    if math.isnan(out) or (math.isinf(out) and not unlimited) or out < 0:
        raise refuse("negative")
    if math.isfinite(out) and out > MAX_TOTAL:
        raise refuse("beyond")
    return out


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
        ends = f"{str(data['src'])!r:.40} -> {str(data['dst'])!r:.40}" if "src" in data and "dst" in data else None
        name = data.get("name", f"#{position}")
        raise SpecError(f"{what} {ends or repr(name)[:80]}: {err.detail}") from None
