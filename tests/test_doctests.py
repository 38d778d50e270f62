"""Every example in the package's docstrings runs and prints what the docstring says: an example that drifted from
the code (a field added to a record, a numpy scalar's repr) misleads whoever copies it."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import placement_dsl

MODULES = sorted(m.name for m in pkgutil.walk_packages(placement_dsl.__path__, "placement_dsl.")
                 if not m.name.endswith("__main__"))


def test_the_walk_finds_the_modules_with_examples():
    assert {"placement_dsl.cluster", "placement_dsl.stage_schedules", "placement_dsl.brute"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} fail (run " \
                               f"python -m pytest --doctest-modules {name.replace('.', '/')}.py)"
