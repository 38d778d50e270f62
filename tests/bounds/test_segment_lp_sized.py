"""A segment's LP is sized before it is built: its rows are built and solved without a look at the clock, so one
started with too little time left overran it (a segment of 1,998 ops on five devices: 2.5 s of a 1.1 s share, the
first 2.5 s of a 10 s solve), and the segment is priced by its path (or an earlier pass's floor) instead."""
from __future__ import annotations

import time

import pytest

from placement_dsl.bounds import segment_lp
from placement_dsl.bounds.segment_lp import lp_seconds, segment_lp_bound
from placement_dsl.deadline import Deadline
from placement_dsl.lp import available
from tests.bounds.test_segment_lp import heads

pytestmark = pytest.mark.skipif(not available(), reason="the segments' LPs are solved by HiGHS")


def test_the_estimate_grows_with_the_segment_and_its_devices():
    assert 0 < lp_seconds(10, 20, 2) < lp_seconds(100, 200, 2) < lp_seconds(100, 200, 4)


def test_an_lp_estimated_past_the_deadline_is_not_built(monkeypatch):
    p = heads(4, 10.0, "port")
    value, note, complete = segment_lp_bound(p, Deadline(30.0))
    assert complete and value > 3.0 + 1e-6  # the LP prices the ports: 62/11, the path alone 3
    monkeypatch.setattr(segment_lp, "LP_CELL_SECONDS", 10.0)  # every LP now "takes" minutes
    began = time.perf_counter()
    sized, note, complete = segment_lp_bound(p, Deadline(30.0))
    assert time.perf_counter() - began < 5.0
    assert not complete and "0 segment LPs" in note
    assert sized <= value + 1e-9 and sized == pytest.approx(3.0)  # the path's price: the bound still holds
    unclocked, _, complete = segment_lp_bound(p)  # without a deadline every LP is solved
    assert complete and unclocked == pytest.approx(value)
