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
from collections.abc import Iterable, Mapping
from dataclasses import FrozenInstanceError
from numbers import Integral, Real
from typing import Any, ClassVar

from .errors import SpecError

MAX_TOTAL = 1e18
MAX_DEVICES = 4096


def total_ok(value: float) -> bool:
    """Whether ``value`` is a finite number within ``[0, MAX_TOTAL]``."""
    return math.isfinite(value) and 0 <= value <= MAX_TOTAL


# How a refused amount is worded: a constructor's field (``work['cpu'] must be ...``, raised as a ValueError that the
# record (:class:`Validated`) turns into its one-line SpecError) or a reader's cell (``node 3: mi: 'x' is not a number``).
FIELD = {"not_number": "{where} must be a number, got {value!r:.40}",
         "digits": "{where} must be at most {top:g}, got an integer of {digits} digits",
         "negative": "{where} must be a finite number >= 0, got {value!r}",
         "beyond": "{where} must be at most {top:g}, got {value!r}",
         "empty": "{where} must be a number, got {value!r}"}
CELL = {"not_number": "{where}: {value!r:.40} is not a number", "empty": "{where}: the cell is empty; give a number",
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
    kind = type(value)
    if (kind is float or kind is int) and 0 <= value <= MAX_TOTAL:  # a number read from JSON (NaN fails both)
        return float(value)

    def refuse(key: str, **fields: Any) -> Exception:
        return error(wording[key].format(where=where, value=value, top=MAX_TOTAL, **fields))

    if isinstance(value, bool):
        raise refuse("not_number")
    if value is None or isinstance(value, str) and not value.strip():
        raise refuse("empty")
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


REQUIRED: Any = object()
"""The default of a field that must be given."""


class Refused(ValueError):
    """A field check's refusal; ``where`` names the part of the field refused (``path.0``), else the field."""

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.where = where


class Spec:
    """One declared field of a :class:`Validated` record: its default (or a ``factory`` making one), the ``check``
    that turns a given value into the field's value (raising :class:`ValueError` with the reason) and its meaning."""

    __slots__ = ("check", "default", "description", "factory")

    def __init__(self, default: Any = REQUIRED, check: Any = None, *, factory: Any = None, description: str = ""):
        self.default, self.factory, self.check, self.description = default, factory, check, description

    def value(self) -> Any:
        """The default value (a fresh one from ``factory``)."""
        return self.factory() if self.factory is not None else self.default


def field(default: Any = REQUIRED, check: Any = None, *, factory: Any = None, description: str = "") -> Any:
    """A declared field of a :class:`Validated` record (a class attribute): see :class:`Spec`."""
    return Spec(default, check, factory=factory, description=description)


def text(value: Any, min_length: int = 0) -> str:
    """``value`` as a string (bytes decoded); anything else is refused."""
    if type(value) is str and len(value) >= min_length:
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode()
        except UnicodeDecodeError:
            raise Refused("Input should be a valid string, unable to parse raw data as a unicode string") from None
    if not isinstance(value, str):
        raise Refused("Input should be a valid string")
    if len(value) < min_length:
        raise Refused(f"String should have at least {min_length} character{'s' if min_length > 1 else ''}")
    return str(value)


def name(value: Any) -> str:
    """A non-empty string."""
    return text(value, 1)


def optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


def real(value: Any) -> float:
    """``value`` as a float: a number or a numeric string; ``True``/``False`` are not numbers (as in :func:`amount`)."""
    if isinstance(value, bool):
        raise Refused(f"Input should be a valid number, got {value!r}")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise Refused("Input should be a valid number, unable to parse string as a number") from None
    if not isinstance(value, Real):
        raise Refused("Input should be a valid number")
    try:
        return float(value)
    except OverflowError:
        raise Refused("Input should be a finite number") from None


TRUE, FALSE = {"1", "on", "t", "true", "y", "yes"}, {"0", "off", "f", "false", "n", "no"}


def flag(value: Any) -> bool:
    """``value`` as a bool: a bool, 0 or 1, or a word such as ``yes``/``false``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE
    elif isinstance(value, Real) and value in (0, 1):
        return bool(value)
    raise Refused("Input should be a valid boolean, unable to interpret input")


def optional_flag(value: Any) -> bool | None:
    return None if value is None else flag(value)


def texts(value: Any) -> tuple[str, ...]:
    """``value`` as a tuple of strings (a list, tuple or other sequence; a string is refused)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise Refused("Input should be a valid tuple")
    out = []
    for i, item in enumerate(value):
        try:
            out.append(text(item))
        except Refused as err:
            raise Refused(str(err), f"{{}}.{i}") from None
    return tuple(out)


def mapping(value: Any) -> dict[str, Any]:
    """``value`` as a dict with string keys (values as given)."""
    if type(value) is dict and all(type(key) is str for key in value):  # read from JSON
        return dict(value)
    if not isinstance(value, Mapping):
        raise Refused("Input should be a valid dictionary")
    for key in value:
        if not isinstance(key, str):
            raise Refused("Input should be a valid string", f"{{}}.{key}.[key]")
    return dict(value)


def _dumped(value: Any) -> Any:
    """A field's value as :meth:`Validated.model_dump` gives it: containers copied."""
    if isinstance(value, dict):
        return {k: _dumped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    return value


class FieldError(SpecError):
    """A :class:`Validated` record refused a field; ``detail`` is ``field: message`` without the object's name,
    ``missing`` the required field that was not given (else ``None``)."""

    def __init__(self, message: str, detail: str = "", missing: str | None = None):
        super().__init__(message)
        self.detail, self.missing = detail, missing


class Validated:
    """A frozen record of declared fields (class attributes made by :func:`field`, in order), each checked on
    construction. The constructor takes the fields by name and raises :class:`FieldError` (a :class:`SpecError`),
    one line naming the object and the field: ``device 'g': memory: memory must be > 0 ..., got -1.0``.

    A subclass checks across fields in :meth:`_after` (a :class:`ValueError` there is named ``value``). Records
    compare and hash by their fields; :meth:`model_copy` and :meth:`model_dump` copy them out.

    >>> class Box(Validated):
    ...     name: str = field(REQUIRED, name)
    ...     size: float = field(1.0, real)
    >>> Box(name="a", size="2")
    Box(name='a', size=2.0)
    >>> Box(name="a", size="big")
    Traceback (most recent call last):
    ...
    placement_dsl.limits.FieldError: box 'a': size: Input should be a valid number, unable to parse string as a number
    """

    model_fields: ClassVar[dict[str, Spec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls.model_fields)
        for key, value in list(vars(cls).items()):
            if isinstance(value, Spec):
                fields[key] = value
                delattr(cls, key)
        cls.model_fields = fields

    def __init__(self, **data: Any) -> None:
        values: dict[str, Any] = {}
        where = missing = None
        try:
            for key, spec in self.model_fields.items():
                where = key
                if key in data:
                    value = data[key]
                    values[key] = value if spec.check is None else spec.check(value)
                elif spec.default is REQUIRED and spec.factory is None:
                    missing = key
                    raise Refused("Field required")
                else:
                    values[key] = spec.value()
            for key in data:
                if key not in values:
                    where = key
                    raise Refused("Extra inputs are not permitted")
            self.__dict__.update(values)
            where = "value"
            self._after()
        except ValueError as err:
            label = getattr(err, "where", None)
            at = where if label is None else label.replace("{}", str(where), 1)
            detail = f"{at}: {err}"
            shown = data.get("name", data.get("src", "?"))
            raise FieldError(f"{type(self).__name__.lower()} {shown!r:.80}: {detail}", detail, missing) from None

    def _after(self) -> None:
        """Checks across fields, once all are set (a subclass's)."""

    def __setattr__(self, key: str, value: Any) -> None:
        raise FrozenInstanceError(f"{type(self).__name__} is frozen: cannot assign to field {key!r}")

    def __delattr__(self, key: str) -> None:
        raise FrozenInstanceError(f"{type(self).__name__} is frozen: cannot delete field {key!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__qualname__, *self.__dict__.values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def __str__(self) -> str:
        return " ".join(f"{k}={v!r}" for k, v in self.__dict__.items())

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Any:
        """A copy with the fields in ``update`` replaced, as given (not checked again)."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        if update:
            out.__dict__.update(update)
        return out

    def model_dump(self, *, exclude: Iterable[str] | None = None, exclude_defaults: bool = False) -> dict[str, Any]:
        """The fields as a dict (containers copied), without those in ``exclude`` and, with ``exclude_defaults``,
        those at their default."""
        skip = set(exclude or ())
        out = {}
        for key, value in self.__dict__.items():
            if key in skip:
                continue
            if exclude_defaults:
                spec = self.model_fields[key]
                if (spec.default is not REQUIRED or spec.factory is not None) and value == spec.value():
                    continue
            out[key] = _dumped(value)
        return out


def construct(model: type[Validated], item: Any, what: str, position: int) -> Any:
    """``item`` (a ``model`` or a mapping of its fields) as a ``model``; errors name ``what`` by its name,
    else by its ``position`` in the list it came from."""
    if isinstance(item, model):
        return item
    if type(item) is not dict and not isinstance(item, Mapping):
        raise SpecError(f"{what} #{position}: expected a mapping of its fields, got {type(item).__name__} "
                        f"{item!r:.40}")
    data = {str(k): v for k, v in item.items()}
    try:
        return model(**data)
    except FieldError as err:  # named again: by its position when it has no name
        ends = f"{str(data['src'])!r:.40} -> {str(data['dst'])!r:.40}" if "src" in data and "dst" in data else None
        label = ends or (repr(data["name"])[:80] if "name" in data else f"#{position}")
        if err.missing is not None:
            raise SpecError(f"{what} {label} has no {err.missing!r}; every {what} needs one") from None
        raise SpecError(f"{what} {label}: {err.detail}") from None
