"""Which options a method takes (its declared options, :mod:`placement_dsl.heuristics.manifest`), ``--option
NAME=VALUE``, and the one-time kernel compilation note."""
from __future__ import annotations

import argparse
import inspect
from types import ModuleType
from typing import Any

from ..errors import PlacementError, SpecError
from ..heuristics import jit, kernel_cache, registry
from ..options import parse
from .common import HEURISTIC_FLAGS, HEURISTIC_METHODS, IP_METHODS, MIP_DEFAULTS, MIP_FLAGS
from .workloads import note

# ---------------------------------------------------------------------------- options per method
COMMON = {"model", "seed", "time_limit"}  # every heuristic's own arguments


def accepted_options(method: str) -> set[str]:
    """Keyword options the heuristic ``method`` takes: its declared options and the common arguments (from its
    function's signature when it declares none)."""
    entry = registry.get(method)
    if entry.options is not None:
        return set(entry.options.model_fields) | COMMON
    params = inspect.signature(entry.fn).parameters.values()
    named = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):  # its own names too (e.g. time_limit)
        return named | set(HEURISTIC_FLAGS)
    return named


def methods_taking(option: str) -> list[str]:
    """The heuristic methods whose function takes ``option``."""
    out = []
    for method in HEURISTIC_METHODS:
        try:
            if option in accepted_options(method):
                out.append(method)
        except PlacementError:  # a heuristic whose module is unavailable takes nothing
            continue
    return out


def heuristic_options(args: argparse.Namespace) -> dict[str, Any]:
    """The heuristic options given that ``args.method`` takes; the others are noted and ignored."""
    given = {k: getattr(args, k) for k in HEURISTIC_FLAGS if getattr(args, k, None) is not None}
    if not given:
        return {}
    accepted = accepted_options(args.method) if args.method in HEURISTIC_METHODS else set()
    for name in sorted(set(given) - accepted):
        note(f"{HEURISTIC_FLAGS[name]} does not apply to method {args.method} and is ignored; "
             f"it is taken by {', '.join(methods_taking(name))}")
    return {k: v for k, v in given.items() if k in accepted}


def declared_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--option NAME=VALUE`` (repeatable), read as the types the heuristic ``args.method`` declares; a MIP method
    takes none (its formulation's options are given from Python: ``solve(..., options={...})``)."""
    given = getattr(args, "option", None) or []
    if not given:
        return {}
    if args.method not in HEURISTIC_METHODS:
        raise SpecError(f"--option {given[0]!r}: method {args.method} takes no --option; the heuristic methods do "
                        "(see 'placement-dsl methods')")
    entry = registry.get(args.method)
    return dict(parse(f"method {args.method}", entry.options, text) for text in given)


def describe_methods() -> list[dict[str, Any]]:
    """Every heuristic with what it optimizes, its first doc line and its declared options (for ``methods``)."""
    return [{"name": h.name, "optimizes": h.optimizes, "doc": h.doc,
             "options": [{"name": o.name, "type": o.type, "default": o.default if o.settable else repr(o.default),
                          "help": o.help, "bounds": o.bounds, "settable": o.settable} for o in h.describe()]}
            for h in registry.load().values()]


def options_epilog() -> str:
    """The options each heuristic declares, one line per method, for ``solve --help``."""
    lines = ["options per method (--option NAME=VALUE; details: placement-dsl methods):"]
    for h in registry.declare().values():  # the declarations: no method's module (numba, Pyomo) is imported
        names = [o.name for o in h.describe() if o.settable]
        if names:
            lines.append(f"  {h.name}: {', '.join(names)}")
    return "\n".join(lines)


def mip_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--solver``/``--time-limit``/``--gap``/``--warm-start`` with defaults for a MIP method; for a
    heuristic method the given ones are noted as ignored."""
    given = {k: getattr(args, k) for k in MIP_FLAGS if getattr(args, k, None) is not None}
    if args.method in IP_METHODS:
        return {**MIP_DEFAULTS, "warm_start": None, **given}
    given = {k: v for k, v in given.items() if k not in taken_mip_options(args)}
    if given:
        flags = ", ".join(MIP_FLAGS[k] for k in given)
        note(f"{flags} appl{'ies' if len(given) == 1 else 'y'} only to the MIP methods "
             f"({', '.join(IP_METHODS)}); ignored for method {args.method}")
    return {}


def taken_mip_options(args: argparse.Namespace) -> dict[str, Any]:
    """MIP flags the heuristic ``args.method``'s function takes too (e.g. schedule-lns's time limit and solver)."""
    if args.method not in HEURISTIC_METHODS:
        return {}
    accepted = accepted_options(args.method)
    return {k: getattr(args, k) for k in MIP_FLAGS if getattr(args, k, None) is not None and k in accepted}


# ---------------------------------------------------------------------------- numba kernels
def kernels_cold(method: str | None) -> bool:
    """Whether running heuristic ``method`` first compiles numba kernels: none of the kernels its code can reach
    has an on-disk cache as new as its source (a fresh install, or an upgrade that changed them all). A kernel
    the method can reach but does not call on every input (e.g. the DP's split read-out) stays uncached, so one
    missing cache alone does not count. Kernels that run in Python (a small workload, :mod:`..heuristics.jit`)
    compile nothing. Unknown methods, MIP methods and any failure to tell give ``False``."""
    if method not in HEURISTIC_METHODS or jit.python_kernels():
        return False
    try:
        from ..heuristics.base import resolve

        kernels = _kernels_reached(resolve(method))
        return bool(kernels) and not any(_cached(k) for k in kernels)
    except Exception:  # noqa: BLE001 - a note is never worth a crash
        return False


def _cached(kernel: Any) -> bool:
    """A kernel that loads from numba's on-disk cache, told without loading numba (:func:`..heuristics.kernel_cache.cached`)."""
    return kernel_cache.cached(kernel)


def _kernels_reached(fn: Any) -> list[Any]:
    """The kernels (:class:`~..heuristics.jit.Kernel`) a heuristic can call: a walk over the names its code (and
    the code of the heuristics functions, classes and modules it names) refers to."""
    package = __package__.rpartition(".")[0] + ".heuristics"
    found: dict[int, Any] = {}
    seen: set[int] = set()
    stack = [fn]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, jit.Kernel):
            found[id(obj)] = obj
            continue
        stack.extend(_referenced(obj, package))
    return list(found.values())


def _referenced(obj: Any, package: str) -> list[Any]:
    """Objects of ``package`` that a function's or class's code names."""
    if isinstance(obj, type):
        return [v for v in vars(obj).values() if callable(v) or isinstance(v, (property, staticmethod, classmethod))]
    obj = getattr(obj.fget if isinstance(obj, property) else obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    if code is None:
        return []
    names = set(_code_names(code))
    spaces: list[dict[str, Any]] = [getattr(obj, "__globals__", {})]
    spaces += [vars(m) for m in spaces[0].values() if isinstance(m, ModuleType) and m.__name__.startswith(package)]
    found = [space[n] for space in spaces for n in names if n in space]
    return [v for v in found if getattr(v, "__module__", None) and str(v.__module__).startswith(package)]


def _code_names(code: Any) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names += _code_names(const)
    return names


def note_cold_kernels(*methods: str | None, limited: bool = False) -> None:
    """Say once on stderr that the first run compiles kernels, when one of ``methods`` will; under a time limit
    (``limited``) they are compiled in the background instead (:mod:`..heuristics.kernel_cache`)."""
    if any(kernels_cold(m) for m in methods if m):
        if limited and kernel_cache.policy() == "background":
            note("kernels not compiled yet: this run uses their Python versions while a background process "
                 "compiles them for later runs")
        else:
            note("compiling kernels once; later runs are fast")


