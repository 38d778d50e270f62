"""Shared fixtures and settings.

* Hypothesis profiles: ``ci`` (the default: derandomized, 60 examples, no deadline), ``dev``
  (random, no deadline) and ``deep`` (random, 1000 examples, no deadline), chosen by the
  environment variable ``HYPOTHESIS_PROFILE`` (``HYPOTHESIS_PROFILE=deep python -m pytest``).
  A test's own ``@settings(max_examples=...)`` is scaled up tenfold under ``deep``.
* The reference data in ../shared/data: tests using the ``shared_data`` fixture (directly or
  through ``dnn_partitioning``) carry the ``shared`` marker automatically and skip cleanly
  without the data. With ``PLACEMENT_DSL_REQUIRE_SHARED=1`` (set by ``.ci/run``) a skipped
  ``shared`` test is a failure instead: in CI the data is always beside the clone.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REQUIRE_SHARED = "PLACEMENT_DSL_REQUIRE_SHARED"
DEEP_FACTOR = 10  # under the deep profile, explicit per-test max_examples grow by this factor

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.register_profile("dev", deadline=None)
settings.register_profile("deep", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
os.environ.setdefault("PLACEMENT_DSL_COLD_KERNELS", "compile")  # the suite's processes compile in-process (as
# a call without a time limit does) instead of each starting a background compile (heuristics.kernel_cache)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def shared_required() -> bool:
    """Whether a skipped ``shared`` test must fail (``PLACEMENT_DSL_REQUIRE_SHARED`` set and not 0)."""
    return os.environ.get(REQUIRE_SHARED, "").strip() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def dnn_partitioning(shared_data: Path) -> Path:
    path = shared_data / "dnn-partitioning"
    if not path.is_dir():
        pytest.skip("../shared/data/dnn-partitioning is not present")
    return path


@pytest.hookimpl(tryfirst=True)  # before -m selects on the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()) and item.get_closest_marker("shared") is None:
            item.add_marker(pytest.mark.shared)
        if PROFILE == "deep":
            _deepen(item)


def _deepen(item: pytest.Item) -> None:
    """Scale a hypothesis test's own ``max_examples`` (which overrides the profile) by :data:`DEEP_FACTOR`."""
    test = getattr(item, "obj", None)
    if getattr(test, "hypothesis", None) is None or getattr(test, "_placement_dsl_deepened", False):
        return  # not a hypothesis test, or scaled already (parametrized items share the function)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is not None and own.max_examples < settings.default.max_examples:
        test._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * DEEP_FACTOR)
    test._placement_dsl_deepened = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and shared_required()
            and item.get_closest_marker("shared") is not None):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        where = "exists" if SHARED_DATA.is_dir() else "is missing"
        report.outcome = "failed"
        report.longrepr = (f"'shared' test skipped under {REQUIRE_SHARED}=1 ({SHARED_DATA} {where}): {reason}; "
                           "CI runs with the reference data beside the clone, so this skip is a broken setup")


@pytest.fixture(scope="session", autouse=True)
def _compiled_kernels() -> None:
    """Compile the heuristics' numba kernels once, before any test runs (numba caches them on disk).

    A fresh install compiles each kernel on its first call, for up to ~45 s in all; tests that give a solve a
    budget of seconds (latency and makespan solves start from their heuristics) would otherwise lose it to the
    compiler when they happen to be the first caller."""
    from placement_dsl import testing
    from placement_dsl.errors import PlacementError
    from placement_dsl.heuristics import registry, run

    problems = [testing.latency_diamond()[0], testing.makespan_fork()[0], testing.contiguity_binds()[0]]
    for name, method in registry.load().items():
        if method.where.startswith("placement_dsl.search."):
            continue  # a search over solver calls (schedule-lns, latency-lns, ...): nothing of its own to compile
        for problem in problems:
            try:
                run(name, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=5)
            except (PlacementError, ValueError, TypeError):
                pass  # a method that declines the instance compiled what it reached


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch):
    """``spy(owner, name)``: ``owner.name`` still runs, and the list returned collects the first argument of each
    call (undone after the test)."""
    def watch(owner: Any, name: str) -> list[Any]:
        calls: list[Any] = []
        real = getattr(owner, name)

        def recording(first: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(first)
            return real(first, *args, **kwargs)

        monkeypatch.setattr(owner, name, recording)
        return calls

    return watch
