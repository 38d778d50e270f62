"""The upper-bound heuristics a certificate of a DAG-ordered problem runs before its levels.

Greedy's split (O(n + m)) runs first with all the share it needs: last, after an even split with slicegraph and
BRKGA, it was stopped on 20,000 ops (GPT-3 onto 64 stages) and the certificate had no placement at all.
"""
from __future__ import annotations

from placement_dsl import certify as certify_module
from placement_dsl import testing
from placement_dsl.certify import certify


def test_greedy_runs_first_with_the_whole_upper_share(monkeypatch):
    given = []

    def recording(deadline, fn, method, *args, time_limit=None, **kwargs):
        given.append((method, time_limit, deadline.left()))
        return fn(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", recording)
    problem, optimum = testing.chain()
    cert = certify(problem, budget=8.0, levels=("simple",))
    assert [m for m, _, _ in given][:3] == ["greedy", "slicegraph", "brkga"]
    _, limit, share = given[0]
    assert limit >= share - 0.05  # not a third of it
    assert cert.objective is not None and cert.objective >= optimum
