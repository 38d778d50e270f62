"""dp-servers takes as many ideals as its DP finishes in the time left (about N^4 P / 12 steps), not a fixed 64."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.ideal_servers import sized_ideals


def _chain(n: int) -> Graph:
    return Graph([Op(name=f"v{i}", work=1 + i % 3, out_bytes=4.0) for i in range(n)],
                 [(f"v{i}", f"v{i + 1}") for i in range(n - 1)], name="chain")


def test_a_graph_of_more_than_64_ideals_is_solved_without_a_time_limit():
    # 70 ideals: refused before ("70 ideals > 64"); its DP takes a few seconds
    cluster = Cluster.hierarchical(2, 2, intra=8.0, inter=1.0)
    r = run("dp-servers", _chain(69), cluster)
    assert r.info["ideals"] == 70 and r.bound == pytest.approx(r.objective)


def test_a_short_time_limit_stops_at_the_ideals_it_cannot_finish_and_says_why():
    cluster = Cluster.hierarchical(2, 2, intra=8.0, inter=1.0)
    assert sized_ideals(2, 0.5) < 70
    r = run("dp-servers", _chain(69), cluster, time_limit=0.5)  # the fallback split, stopped, no bound
    assert r.info["stopped"] == "time limit" and r.bound is None
    with pytest.raises(SpecError, match=r"more than max_ideals=60 ideals .*'pipeline'"):  # a given max_ideals stands
        run("dp-servers", _chain(69), cluster, max_ideals=60, time_limit=60)
