"""Old import paths of moved names, kept for one release with a :class:`DeprecationWarning`.

A module whose public names moved to another module sets ``__getattr__ = moved(__name__, {name: module})`` (or
``moved(__name__, "new.module")`` where the whole module moved); reading such a name from the old module warns and
returns the object from its new home.
"""
from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


def moved(old: str, names: Mapping[str, ModuleType | str] | str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old`` that forwards each name of ``names`` to the module it moved to (a module,
    or its full name when the new module sits above the old one and may only be imported on use); ``names`` a
    module's full name: every name, for a module moved whole (a name the new module lacks is no attribute of either).

    >>> import types
    >>> new = types.ModuleType("new"); new.f = len
    >>> getattr_ = moved("old", {"f": new})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("f") is len, str(caught[0].message)
    (True, 'old.f moved to new.f; import it from there (old.f goes in the next release)')
    """
    def __getattr__(name: str) -> Any:
        if not isinstance(names, str) and name not in names:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        target = names if isinstance(names, str) else names[name]
        module = importlib.import_module(target) if isinstance(target, str) else target
        found = getattr(module, name)  # AttributeError, unwarned, for a name a module moved whole never had
        warnings.warn(f"{old}.{name} moved to {module.__name__}.{name}; import it from there ({old}.{name} goes in "
                      "the next release)", DeprecationWarning, stacklevel=2)
        return found

    return __getattr__


def forward(what: str, target: str, *args: Any, instead: str = "") -> Any:
    """The body of a deprecated function ``what`` that moved to ``target`` (``"module:function"``): warn, then call
    ``target`` with ``args``. The module is imported by name on use, so a method of a low layer may forward to a
    function of a layer above it (``Placement.evaluate`` to the cost model) without the low layer importing it.

    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     forward("size()", "builtins:len", [1, 2]), str(caught[0].message)
    (2, 'size() is deprecated; call builtins.len(...) (size() goes in the next release)')
    """
    module, _, name = target.partition(":")
    warnings.warn(f"{what} is deprecated; call {instead or f'{module}.{name}(...)'} ({what} goes in the next release)",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(module), name)(*args)


def keyword(function: str, name: str, instead: str, stacklevel: int = 3) -> None:
    """Warn that the keyword ``name`` of ``function`` is deprecated in favour of ``instead`` (one release).

    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     keyword("solve", "windows", "options={'windows': ...}")
    ...     str(caught[0].message)
    "solve(windows=...) is deprecated; give options={'windows': ...} (windows= goes in the next release)"
    """
    warnings.warn(f"{function}({name}=...) is deprecated; give {instead} ({name}= goes in the next release)",
                  DeprecationWarning, stacklevel=stacklevel)


def public(module: ModuleType) -> dict[str, ModuleType]:
    """Every public name ``module`` defines itself, mapped to ``module`` (for a module moved whole)."""
    return {name: module for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", module.__name__) == module.__name__
            and not isinstance(value, ModuleType)}
