"""The certificate's levels register themselves (which problems they bound, their place, whose default
hierarchy they join); certify is only the driver, and a new level is one module."""
from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from placement_dsl import testing
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import LEVELS, certify, default_levels
from placement_dsl.errors import SpecError
from placement_dsl.levels import base
from placement_dsl.levels.base import ALL, Family, defaults_of, family, level

# the hierarchies certify runs by default, per family: a change here changes every certificate
DEFAULTS = {
    Family.MTPP: ("simple", "capacity", "one-or-cut", "cut-stages", "ordered-memory", "host-share", "dp", "stage-cut", "superblock",
                  "guess",
                  "exact"),
    Family.ROUTED_MTPP: ("simple", "capacity", "dp", "throughput"),
    Family.THROUGHPUT: ("simple", "capacity", "one-or-cut", "cut-stages", "host-share", "dp", "chain", "superblock", "throughput"),
    Family.NONCONTIGUOUS: ("simple", "capacity", "one-or-cut", "dp", "superblock", "throughput", "neighbourhoods"),
    Family.LATENCY: ("critical-path", "route-path", "device-work", "cut-spine", "segment-path", "run-paths",
                     "latency-lp", "latency"),
    Family.MAKESPAN: ("route-path", "device-work", "segment-path", "cut-segments", "split-heads", "segment-lp",
                      "segment-schedules", "window-schedules", "lifted-heads", "schedule-lp", "schedule"),
}
ORDER = ["simple", "capacity", "one-or-cut", "cut-stages", "ordered-memory", "host-share", "dp", "stage-cut", "chain", "no-cut-io",
         "no-dag", "superblock", "guess",
         "throughput", "neighbourhoods", "exact", "critical-path", "route-path", "device-work", "cut-spine",
         "segment-path", "cut-segments", "split-heads", "segment-lp", "segment-schedules", "window-schedules", "lifted-heads", "run-paths", "latency-lp",
         "latency", "schedule-lp", "schedule"]


@pytest.fixture
def scratch(monkeypatch):
    """The registry as it is, restored after the test (the same dict object certify reads)."""
    saved = dict(LEVELS)
    yield base
    LEVELS.clear()
    LEVELS.update(saved)


def test_the_levels_and_their_default_hierarchies():
    assert [name for name in LEVELS if name in ORDER] == ORDER  # levels registered elsewhere may sit between
    assert {fam: defaults_of(fam) for fam in Family} == DEFAULTS
    chain, _ = testing.INSTANCES["chain"]()
    assert family(chain) is Family.MTPP and default_levels(chain) == DEFAULTS[Family.MTPP]
    assert LEVELS["simple"].free and LEVELS["neighbourhoods"].weight == 2.0 and LEVELS["chain"].always


def test_a_registered_level_runs_in_its_rank_and_joins_its_family_default(scratch):
    @level("half-work", rank=15, defaults={Family.MTPP}, closed_form=True)
    def half_work(run, seconds):
        """A tiny constant bound, below every optimum of the instance."""
        return 0.5, LevelStatus.OPTIMAL, "half", ALL

    chain, optimum = testing.INSTANCES["chain"]()
    assert [name for name in LEVELS if name in ("simple", "half-work", "dp")] == ["simple", "half-work", "dp"]
    assert default_levels(chain)[:8] == ("simple", "capacity", "one-or-cut", "cut-stages", "ordered-memory",
                                         "host-share", "half-work", "dp")
    cert = certify(chain, budget=60.0, levels=("dp", "half-work"), stop_at_gap=False)
    assert [r.level for r in cert.levels] == ["half-work", "dp"]  # rank order, not the order asked
    assert cert.levels[0].bound == 0.5 and cert.bound <= optimum
    assert LEVELS["half-work"].doc == "A tiny constant bound, below every optimum of the instance."


def test_a_name_taken_by_another_level_is_refused(scratch):
    with pytest.raises(SpecError, match="level 'dp' is already registered by placement_dsl.levels.dp._dp"):
        level("dp", rank=1)(lambda run, seconds: None)
    with pytest.raises(SpecError, match="must be Family members"):
        level("x", rank=1, defaults={"mtpp"})


def test_load_finds_a_new_module_of_the_package(scratch, tmp_path, monkeypatch):
    """A new level is one file in placement_dsl/levels: load() walks the package."""
    import placement_dsl.levels as package

    (tmp_path / "zero_bound.py").write_text(textwrap.dedent('''
        from placement_dsl.certificate import LevelStatus
        from placement_dsl.levels.base import ALL, level

        @level("zero", rank=1)
        def zero(run, seconds):
            return 0.0, LevelStatus.OPTIMAL, "", ALL
    '''))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(base, "_loaded", [False])
    try:
        assert next(iter(base.load())) == "zero"
    finally:
        sys.modules.pop("placement_dsl.levels.zero_bound", None)


def test_the_old_tuples_still_read_with_a_warning():
    import placement_dsl.certify as module

    with pytest.warns(DeprecationWarning, match="MTPP_LEVELS is deprecated"):
        assert module.MTPP_LEVELS == DEFAULTS[Family.MTPP]
    sys.modules.pop("placement_dsl.certify_latency", None)
    with pytest.warns(DeprecationWarning, match="certify_latency is deprecated"):
        old = importlib.import_module("placement_dsl.certify_latency")
    assert LEVELS["critical-path"].run is old.critical_path


def test_the_single_sample_bounds_load_only_when_their_levels_run():
    """Registering the latency and makespan levels loaded their six bound modules (CP-SAT's segments, the segment
    LP, ...) into every certification, a throughput problem's too: part of ``bounds``' start-up."""
    import subprocess

    heavy = ("placement_dsl.bounds.segment_lp", "placement_dsl.bounds.makespan", "placement_dsl.bounds.memory_path",
             "placement_dsl.cpsat_segments", "placement_dsl.bounds.segments", "placement_dsl.bounds.latency")
    code = f"import sys, placement_dsl.certify; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
