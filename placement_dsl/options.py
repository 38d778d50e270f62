"""Options a registered method declares: one small model per heuristic or formulation.

A method's options are the fields of an :class:`Options` subclass, each made by :func:`option` (a default, a
one-line help and, for numbers, bounds)::

    class BrkgaOptions(Options):
        population: int = option(100, "chromosomes per generation", ge=2)

The registry that holds the method keeps the model (``@heuristic(..., options=BrkgaOptions)``,
``Formulation(..., options=...)``); :func:`validate` checks what a caller passes against it and refuses an
unknown or invalid option in one line naming the method and the option, and :func:`describe` lists the options
for ``placement-dsl methods`` and ``--help``. This module imports no third-party package, so reading a model stays cheap.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass
from numbers import Real
from typing import Any, ClassVar, get_type_hints

from .errors import SpecError
from .limits import Refused, real

SCALARS = (bool, int, float, str)
"""The option types a command line can set (``--option NAME=VALUE``); others are given from Python."""


class Bound:
    """One bound of a numeric option (pydantic's ``annotated_types`` spelling: ``ge``, ``gt``, ``le`` or ``lt``)."""

    __slots__ = ("ge", "gt", "le", "lt")

    def __init__(self, key: str, value: float):
        for k in self.__slots__:
            setattr(self, k, value if k == key else None)


class OptionField:
    """A declared option: its type (``annotation``, set when its class is made), default, help and bounds
    (``metadata``: :class:`Bound` items, checked in the order ``le``, ``lt``, ``ge``, ``gt``)."""

    __slots__ = ("annotation", "default", "description", "metadata")

    def __init__(self, default: Any, description: str, metadata: list[Bound]):
        self.annotation: Any = Any
        self.default, self.description, self.metadata = default, description, metadata


BOUND_WORDS = {"le": "less than or equal to", "lt": "less than", "ge": "greater than or equal to", "gt": "greater than"}
BOUND_TESTS = {"le": lambda v, b: v <= b, "lt": lambda v, b: v < b, "ge": lambda v, b: v >= b, "gt": lambda v, b: v > b}


def _as_int(value: Any) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise Refused("Input should be a valid integer, unable to parse string as an integer") from None
    if isinstance(value, Real):
        value = float(value)
        if not math.isfinite(value):
            raise Refused("Input should be a finite number")
        if not value.is_integer():
            raise Refused("Input should be a valid integer, got a number with a fractional part")
        if abs(value) >= 2**63:
            raise Refused("Unable to parse input string as an integer, exceeded maximum size")
        return int(value)
    raise Refused("Input should be a valid integer")


TRUE, FALSE = {"1", "on", "t", "true", "y", "yes"}, {"0", "off", "f", "false", "n", "no"}


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    if isinstance(value, Real) and value in (0, 1):
        return bool(value)
    interpretable = isinstance(value, (str, int)) or (isinstance(value, float) and value.is_integer()
                                                        and abs(value) < 2**63)
    raise Refused("Input should be a valid boolean" + (", unable to interpret input" if interpretable else ""))


def _as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise Refused("Input should be a valid string")
    return value


CONVERT = {int: _as_int, float: real, bool: _as_bool, str: _as_str}


def _checked(spec: OptionField, value: Any) -> Any:
    """``value`` as the option ``spec`` declares it (its type, then its bounds); :class:`ValueError` naming why not."""
    args = getattr(spec.annotation, "__args__", ())
    if value is None and type(None) in args:
        return None
    kind = _scalar(spec.annotation)
    if kind is None:
        return value
    value = CONVERT[kind](value)
    for key in ("le", "lt", "ge", "gt"):
        for bound in spec.metadata:
            limit = getattr(bound, key)
            if limit is not None and not BOUND_TESTS[key](value, limit):
                raise Refused(f"Input should be {BOUND_WORDS[key]} {limit}")
    return value


class Options:
    """The base of a method's declared options: unknown names are refused, values are checked and frozen.

    Each option is a class annotation (its type: ``int``, ``float``, ``bool``, ``str``, one of these or ``None``, or
    ``Any``, which is taken as given) with an :func:`option` as its value; a subclass adds to its base's options.

    >>> class Depth(Options):
    ...     depth: int = option(3, "how deep", ge=1)
    >>> Depth(depth="2").depth, Depth().depth
    (2, 3)
    """

    model_fields: ClassVar[dict[str, OptionField]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls.model_fields)
        declared = vars(cls).get("__annotations__", {})
        try:
            hints = get_type_hints(cls)
        except (NameError, TypeError):
            hints = {}
        for key in declared:
            if key.startswith("_") or key == "model_fields":
                continue
            value = vars(cls).get(key, None)
            spec = value if isinstance(value, OptionField) else OptionField(value, "", [])
            spec.annotation = hints.get(key, Any)
            fields[key] = spec
            if key in vars(cls):
                delattr(cls, key)
        cls.model_fields = fields

    def __init__(self, **given: Any) -> None:
        unknown = sorted(set(given) - set(self.model_fields))
        if unknown:
            raise SpecError(f"{type(self).__name__}: unknown option {unknown[0]!r}")
        for key, spec in self.model_fields.items():
            try:
                value = _checked(spec, given[key]) if key in given else spec.default
            except ValueError as err:
                raise SpecError(f"{type(self).__name__}: option {key}={given[key]!r}: {err}") from None
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise FrozenInstanceError(f"{type(self).__name__} is frozen: cannot assign to option {key!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.model_fields)})"


def option(default: Any, help: str, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
           lt: float | None = None) -> Any:
    """A declared option: its default, a one-line help and, for a number, its bounds."""
    bounds = [Bound(k, v) for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None]
    return OptionField(default, help, bounds)


@dataclass(frozen=True)
class OptionInfo:
    """One declared option as the listings show it."""

    name: str
    type: str
    default: Any
    help: str
    bounds: str
    settable: bool  # a command line can give it (a scalar type)

    def line(self) -> str:
        """``name (type, default D, bounds): help``."""
        extra = ", ".join(x for x in (self.type, f"default {self.default!r}", self.bounds) if x)
        return f"{self.name} ({extra}): {self.help}"


def _type_name(annotation: Any) -> str:
    name = getattr(annotation, "__name__", None)
    return name if name is not None and not getattr(annotation, "__args__", None) else \
        str(annotation).replace("typing.", "")


def _scalar(annotation: Any) -> type | None:
    """The scalar type a command-line value of ``annotation`` is read as (``None``: not settable)."""
    if annotation in SCALARS:
        return annotation
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return args[0] if len(args) == 1 and args[0] in SCALARS else None


def _bounds(info: Any) -> str:
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    found = [f"{words[k]} {getattr(m, k)}" for m in info.metadata for k in words if getattr(m, k, None) is not None]
    return " and ".join(found)


def describe(model: type[Options] | None) -> list[OptionInfo]:
    """The options ``model`` declares, in declaration order (none for ``None``)."""
    if model is None:
        return []
    return [OptionInfo(name, _type_name(info.annotation), info.default, info.description or "", _bounds(info),
                       _scalar(info.annotation) is not None)
            for name, info in model.model_fields.items()]


def validate(owner: str, model: type[Options] | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options ``given`` to ``owner`` (e.g. ``"heuristic 'brkga'"``), checked against its declared ``model``:
    only the given ones come back (a method keeps its own defaults); an unknown or invalid one is a
    :class:`SpecError` naming ``owner`` and the option. ``model=None`` declares no options."""
    if not given:
        return {}
    if model is None:
        raise SpecError(f"{owner} takes no options {sorted(given)}")
    unknown = sorted(set(given) - set(model.model_fields))
    if unknown:
        raise SpecError(f"{owner}: unknown option {unknown[0]!r}; it takes {', '.join(model.model_fields) or 'none'}")
    checked = {}
    for name, value in given.items():
        try:
            checked[name] = _checked(model.model_fields[name], value)
        except ValueError as err:
            raise SpecError(f"{owner}: option {name}={value!r}: {err}") from None
    return checked


def parse(owner: str, model: type[Options] | None, text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` from a command line, read as the declared option's type (``none`` for an optional one's
    ``None``); :class:`SpecError` naming ``owner`` and the option when it is unknown, not settable or ill-typed."""
    name, eq, value = text.partition("=")
    name = name.strip().replace("-", "_")
    if not eq or not name:
        raise SpecError(f"--option {text!r}: give NAME=VALUE")
    fields = {} if model is None else model.model_fields
    if name not in fields:
        raise SpecError(f"{owner}: unknown option {name!r}; it takes {', '.join(fields) or 'none'}")
    kind = _scalar(fields[name].annotation)
    if kind is None:
        raise SpecError(f"{owner}: option {name!r} takes a {_type_name(fields[name].annotation)}, given from Python, "
                        "not from the command line")
    if value.strip().lower() == "none" and type(None) in getattr(fields[name].annotation, "__args__", ()):
        return name, None
    if kind is bool:
        word = value.strip().lower()
        if word not in ("true", "false", "1", "0", "yes", "no"):
            raise SpecError(f"{owner}: option {name}={value!r}: give true or false")
        return name, word in ("true", "1", "yes")
    try:
        return name, kind(value)
    except ValueError:
        raise SpecError(f"{owner}: option {name}={value!r}: give {'an' if kind is int else 'a'} {kind.__name__}") from None
