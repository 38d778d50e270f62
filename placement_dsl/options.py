"""Options a registered method declares: one small pydantic model per heuristic or formulation.

A method's options are the fields of an :class:`Options` subclass, each made by :func:`option` (a default, a
one-line help and, for numbers, bounds)::

    class BrkgaOptions(Options):
        population: int = option(100, "chromosomes per generation", ge=2)

The registry that holds the method keeps the model (``@heuristic(..., options=BrkgaOptions)``,
``Formulation(..., options=...)``); :func:`validate` checks what a caller passes against it and refuses an
unknown or invalid option in one line naming the method and the option, and :func:`describe` lists the options
for ``placement-dsl methods`` and ``--help``. This module imports only pydantic, so reading a model stays cheap.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import SpecError

SCALARS = (bool, int, float, str)
"""The option types a command line can set (``--option NAME=VALUE``); others are given from Python."""


class Options(BaseModel):
    """The base of a method's declared options: unknown names are refused, values are checked and frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


def option(default: Any, help: str, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
           lt: float | None = None) -> Any:
    """A declared option: its default, a one-line help and, for a number, its bounds."""
    return Field(default, description=help, ge=ge, gt=gt, le=le, lt=lt)


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
    try:
        checked = model(**given)
    except ValidationError as err:
        first = err.errors()[0]
        name = str(first["loc"][0]) if first.get("loc") else "?"
        raise SpecError(f"{owner}: option {name}={given.get(name)!r}: {first['msg']}") from None
    return {name: getattr(checked, name) for name in given}


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
