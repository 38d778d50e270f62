"""How certify shares its budget with the DP level on large graphs: the kernels its forked children run are loaded
once in the parent, and the DP ends a margin before its share so that its split and bound come back rather than
being stopped (cnn-10000 on 16 accelerators and a CPU, under load: gap 17 % before, 0-8 % after)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from placement_dsl import certify as certify_module
from placement_dsl.certify import certify
from placement_dsl.constraints import DagOrder
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.levels import dp as dp_level
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem, Stages

ROOT = Path(__file__).resolve().parents[2]


def _chain_problem(n: int = 40) -> Problem:
    g = Graph([Op(name=f"v{i}", work=1.0 + i % 3, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    return Problem(g, Stages(3), Bottleneck(), [DagOrder()])


def test_the_heuristics_kernels_are_loaded_once_in_the_parent():
    code = ("import sys\nfrom tests.certify.test_certify_dp_share import _chain_problem\n"
            "import placement_dsl.certify as c\nfrom placement_dsl.heuristics import jit\n"
            "import placement_dsl.deadline as d\nd.contention = lambda: 1.0\n"
            "c.certify(_chain_problem(), budget=20, levels=('simple',))\n"
            "print(int(jit.is_compiled()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip().splitlines()[-1]) > 0  # loaded here, so each forked child inherits it


def test_the_dp_ends_a_margin_before_its_share(monkeypatch):
    seen = []

    def fake(deadline, fn, *args, **kwargs):
        seen.append((deadline.left(), kwargs["time_limit"]))
        raise SpecError("recorded")

    monkeypatch.setattr(dp_level, "call_within", fake)
    monkeypatch.setattr(certify_module, "_upper", lambda *args, **kwargs: None)
    certify(_chain_problem(), budget=40, levels=("dp",))
    (left, limit), = seen
    assert limit <= left - min(dp_level.STOP_MARGIN * left, 5.0) + 0.1 and limit > 0.5 * left


def _beside_a_host(n: int) -> Problem:
    from placement_dsl.cluster import Cluster
    from placement_dsl.constraints import Contiguous, Memory
    from placement_dsl.objectives import Throughput

    g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 4.0}, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    return Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), [Memory(), Contiguous()])


def test_beside_a_host_a_dp_estimated_past_its_share_is_not_started(monkeypatch):
    """cnn-20000 beside a CPU: the DP's fork summed 21,121 ideals over 19,968 supernodes (1.7 s of CPU) and swept
    them, stopped at its share without a split: 1.2 s of a 5 s bounds at load 6. Its least work is estimated first:
    here each ideal of a 2,000-op chain costs a second (a stub of the rate), and the fork never starts."""
    forked = []

    def recording(deadline, fn, *args, **kwargs):
        forked.append(args[0])
        return fn(*args, **kwargs)
    monkeypatch.setattr(dp_level, "call_within", recording)
    monkeypatch.setattr(dp_level, "contention", lambda: 1.0)
    monkeypatch.setattr(certify_module, "_upper", lambda *args, **kwargs: None)
    problem = _beside_a_host(2_000)
    monkeypatch.setattr(dp_level, "SUM_SECONDS", 1.0)
    why = dp_level.past_share(problem, 60.0)
    assert why is not None and "2,001 ideals" in why
    cert = certify(problem, budget=20, levels=("dp",))
    row = {r.level: r for r in cert.levels}["dp"]
    assert forked == [] and row.status.value == "skipped" and "not started" in row.message
    monkeypatch.setattr(dp_level, "SUM_SECONDS", 1e-12)  # where it fits, it runs
    assert dp_level.past_share(problem, 60.0) is None
    assert dp_level.past_share(_chain_problem(3_000), 1e-9) is None  # one class: the slicing path, not estimated
