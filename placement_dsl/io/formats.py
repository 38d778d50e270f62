"""The importers' registry: each input format registers its reader where it is defined.

An importer is a function ``read(path, **options) -> Workload`` registered by name with what
identifies its files::

    from placement_dsl.io.formats import importer

    @importer("csv-graph", suffixes=(".csv",))
    def read(path, **options): ...

``suffixes`` claim a file by its extension; ``sniff(head) -> float`` says how surely the first
4 KiB of a file's text are this format (0: not this one; the surest wins, the first registered
on a tie). ``training=True``: the reader builds the training graph itself when given
``training=True`` (else :func:`~placement_dsl.io.workload.load_workload` derives it). ``model=True``:
a model the ``import`` command reads (taking ``batch``, ``seq``, ``granularity``, ``depth``);
``spec=True``: it reads a name (``MODULE:FACTORY``), not a file, and is not a workload format.

:func:`load` imports every module of this package once, so the package's own formats are
registered; a format defined elsewhere registers when its module is imported.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..plugins import import_modules


@dataclass(frozen=True)
class Importer:
    """A registered input format: its name, reader, file suffixes, content sniffer and capabilities."""

    name: str
    read: Callable[..., Any]
    suffixes: tuple[str, ...] = ()
    sniff: Callable[[str], float] | None = None
    training: bool = False
    model: bool = False
    spec: bool = False
    doc: str = ""


IMPORTERS: dict[str, Importer] = {}
"""Every registered format by name (complete after :func:`load`)."""

_loaded: list[bool] = [False]


def importer(name: str, *, suffixes: tuple[str, ...] = (), sniff: Callable[[str], float] | None = None,
             training: bool = False, model: bool = False, spec: bool = False,
             doc: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated reader as the format ``name`` (returned unchanged); see the module's documentation.

    A name registered by another function is refused (:class:`SpecError`); the same function again
    (its module reloaded) replaces the entry."""
    if not isinstance(name, str) or not name:
        raise SpecError(f"importer name {name!r}: give a non-empty string")
    if isinstance(suffixes, str) or not all(isinstance(s, str) and s.startswith(".") for s in suffixes):
        raise SpecError(f"importer {name!r}: suffixes {suffixes!r} must be a tuple like ('.csv',)")

    def register(read: Callable[..., Any]) -> Callable[..., Any]:
        old = IMPORTERS.get(name)
        where = f"{read.__module__}.{read.__qualname__}"
        if old is not None and f"{old.read.__module__}.{old.read.__qualname__}" != where:
            raise SpecError(f"importer {name!r} is already registered by "
                            f"{old.read.__module__}.{old.read.__qualname__}; {where} needs another name")
        first = (read.__doc__ or "").strip().split("\n")[0]
        IMPORTERS[name] = Importer(name, read, tuple(s.lower() for s in suffixes), sniff, training, model, spec,
                                   doc or first)
        return read
    return register


def load() -> dict[str, Importer]:
    """Import every module of this package once, so that its formats are registered; the registry."""
    if not _loaded[0]:
        import_modules(__package__)
        _loaded[0] = True
    return IMPORTERS


def names() -> list[str]:
    """The workload formats a file can be read in (not the ``spec`` importers), in registration order."""
    return [i.name for i in load().values() if not i.spec]


def get(name: str) -> Importer:
    """The format ``name``; :class:`SpecError` naming the choices when there is none."""
    found = load().get(name) if isinstance(name, str) else None
    if found is None or found.spec:
        raise SpecError(f"unknown format {name!r}; choose from {names()}")
    return found


def by_suffix(path: Path, model: bool = False) -> Importer | None:
    """The first format (a ``model`` one if asked) whose suffixes claim ``path``, else ``None``."""
    suffix = path.suffix.lower()
    return next((i for i in load().values() if suffix in i.suffixes and not i.spec and (i.model or not model)), None)


def by_content(head: str) -> Importer | None:
    """The format whose sniffer is surest of ``head`` (the first registered on a tie), else ``None``."""
    best, score = None, 0.0
    for imp in load().values():
        if imp.sniff is not None and not imp.spec:
            sure = float(imp.sniff(head))
            if sure > score:
                best, score = imp, sure
    return best


def models(spec: bool) -> list[Importer]:
    """The importers the ``import`` command reads: files (``spec=False``) or ``MODULE:FACTORY`` names."""
    return [i for i in load().values() if i.model and i.spec == spec]
