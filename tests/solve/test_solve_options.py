"""A formulation's own options go through ``solve(..., options=...)``, checked against what it declares; the old
``windows=`` keyword still works for one release, with a DeprecationWarning."""
from __future__ import annotations

import pytest

from placement_dsl import testing
from placement_dsl.errors import SpecError
from placement_dsl.formulations import get
from placement_dsl.options import describe
from placement_dsl.solve import solve


def test_the_chain_formulation_declares_windows():
    assert [(o.name, o.default) for o in describe(get("chain").options)] == [("windows", None)]
    assert get("throughput").options is None


def test_an_unknown_or_invalid_formulation_option_is_refused_by_name():
    problem, _ = testing.accelerators_cpu()
    with pytest.raises(SpecError, match=r"formulation 'chain': unknown option 'window'; it takes windows"):
        solve(problem, formulation="chain", warm_start="dp", options={"window": True})
    with pytest.raises(SpecError, match=r"formulation 'chain': option windows='often'"):
        solve(problem, formulation="chain", warm_start="dp", options={"windows": "often"})
    with pytest.raises(SpecError, match=r"options \['a'\]: give a mapping"):
        solve(problem, formulation="chain", options=["a"])


def test_the_formulation_receives_its_option():
    from placement_dsl.constraints import Contiguous

    contiguous, optimum = testing.contiguity_binds()
    problem = testing.without(contiguous, Contiguous)
    _, start = testing.brute_force(contiguous)  # by default a start in the DP class sets position windows;
    windowed = solve(problem, formulation="chain", warm_start=start, time_limit=20)  # windows=False passes it
    assert "position windows at T*" in windowed.message
    plain = solve(problem, formulation="chain", warm_start=start, options={"windows": False}, time_limit=20)
    assert "position windows" not in plain.message
    assert plain.objective == pytest.approx(optimum)


def test_the_windows_keyword_is_deprecated_and_still_works():
    problem, _ = testing.accelerators_cpu()
    with pytest.warns(DeprecationWarning, match=r"solve\(windows=\.\.\.\) is deprecated; give options="), \
            pytest.raises(SpecError, match="windows=True needs a warm start"):
        solve(problem, formulation="chain", warm_start="none", windows=True)
    with pytest.warns(DeprecationWarning), pytest.raises(SpecError, match=r"windows 'yes': give True"):
        solve(problem, formulation="chain", windows="yes")
