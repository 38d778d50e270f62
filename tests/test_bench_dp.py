"""The DP bench's ``--peer``: ours and the paper's C++ DP as whole processes on each workload."""
from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_ours_is_timed_after_an_untimed_run_of_the_same_command_on_the_same_workload(monkeypatch):
    """The timed run must find numba's cache filled for the kernels its own workload compiles: one warm-up on a
    workload whose lattice runs in Python left GNMT inference's first timed run compiling (35.6 s of CPU, not 1.1)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import bench_dp as bench

    calls = []

    def fake(cmd, stdin=None, timeout=600.0):
        calls.append((list(cmd), stdin))
        if stdin is not None:  # the peer: its split as JSON after its log lines
            return 'log\n{"cpus": [], "fpgas": [], "maxLoad": 7.5}', 2.0, 1.0
        return json.dumps({"objective": 7.5}), 0.5, 0.25

    monkeypatch.setattr(bench, "_whole_process", fake)
    row = {"file": "throughput-inputs/LayerGraphs/g.json", "dp_runtime": "1s", "dp_tps": "7.5"}
    found = bench.measure_peer(row, Path("/peer/dp"))
    ours = [cmd for cmd, stdin in calls if stdin is None]
    assert len(ours) == 2 and ours[0] == ours[1] and ours[0][-5:] == [str(bench.DATA / row["file"]), "--method", "dp",
                                                                       "--json", "--quiet"]
    assert calls[-1] == (["/peer/dp"], bench.DATA / row["file"])  # the peer reads the instance on standard input
    assert (found["wall"], found["cpu"], found["objective"], found["peer_objective"]) == (0.5, 0.25, 7.5, 7.5)
    table = bench.peer_table([found]).splitlines()
    assert "CPU ratio" in table[0] and "0.25" in table[2] and "met" in table[2] and "differ" not in table[2]
