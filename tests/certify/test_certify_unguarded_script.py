"""certify from a script without an ``if __name__ == "__main__":`` guard: the spawned children that re-import the
script stop at its certify call with one line saying why, instead of certifying again (and failing to start
children of their own with a page of traceback); the script's own call still answers."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
    from placement_dsl import Cluster, Graph, Op
    from placement_dsl.certify import certify
    from placement_dsl.cluster import Device, Link
    from placement_dsl.objectives import Makespan
    from placement_dsl.problem import Problem

    g = Graph([Op(name=f"t{i}", work={"d0": 1.0 + i % 2, "d1": 2.0}, out_bytes=1.0) for i in range(6)],
              [("t0", "t1"), ("t0", "t2"), ("t1", "t3"), ("t2", "t3"), ("t3", "t4"), ("t3", "t5")])
    c = Cluster([Device(name="d0", kind="d0", invocations=False), Device(name="d1", kind="d1", invocations=False)],
                [Link(src="d0", dst="d1", bandwidth=1.0), Link(src="d1", dst="d0", bandwidth=1.0)])
    cert = certify(Problem(g, c, objective=Makespan()), budget=10)
    print("certified", cert.objective)
"""


def test_children_re_running_an_unguarded_script_stop_with_one_line(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0 and done.stdout.count("certified") == 1, done.stderr
    assert "Traceback" not in done.stderr and "bootstrapping phase" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert all("certify was called again" in line and "__name__" in line for line in lines)
