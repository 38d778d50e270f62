"""Interleaved 1F1B, ZB-H1 and ZBV run from the exported schedule CSV by torch's schedule runtime: 4 virtual stages on
2 CPU ranks, output and gradients as unsplit (``examples/run_interleaved.py``)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from placement_dsl.profile import LinkTime, RunCosts, read_calibration, write_calibration

ROOT = Path(__file__).resolve().parents[2]


def test_exported_interleaved_and_zero_bubble_schedules_run_in_torch(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    base = tmp_path / "base.json"
    write_calibration(RunCosts(1.1, LinkTime(0.0, 1e6), op_ms=0.001, scales=(("gpipe", 1.2), ("1f1b", 1.15))), base)
    cal = tmp_path / "cal.json"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "run_interleaved.py"), "--calibration", str(base),
                           "--calibration-out", str(cal)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "torch split it into 4 stages, stage k on rank k mod 2 (zbv: stages k and 3 - k on rank k)" in out, out
    for schedule in ("interleaved-1f1b", "zb-h1", "zbv"):
        assert f"{schedule}: output matches the unsplit model: True; gradients match: True; step per micro-batch " \
               "predicted" in out, out
        assert re.search(rf"^{schedule}: .*\(idle stages \d+\.\d+ ms: \d+\.\d+ ms per task; slowdown x\d+\.\d+",
                         out, flags=re.MULTILINE), out
        # each schedule's compute factor fitted apart, from the ranks' CPU time in its own steps
        assert re.search(rf"^{schedule}: .*its own compute factor x\d+\.\d+ \(CPU time of the ranks' stages",
                         out, flags=re.MULTILINE), out
    assert out.rstrip().endswith("all outputs and gradients match the unsplit model")
    # each schedule's factor written beside the base calibration's terms, read back as import --calibration reads it
    costs, _ = read_calibration(cal)
    factors = dict(costs.scales)
    assert set(factors) == {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv"}
    assert (factors["gpipe"], factors["1f1b"], costs.scale, costs.op_ms) == (1.2, 1.15, 1.1, 0.001)
    for schedule in ("interleaved-1f1b", "zb-h1", "zbv"):
        factor = re.search(rf"^{schedule}: .*its own compute factor x(\d+\.\d+)", out, flags=re.MULTILINE).group(1)
        assert costs.under(schedule).scale == pytest.approx(float(factor), abs=5e-4)
        assert re.search(rf"{schedule} x{factor}: \d+\.\d+ ms against \d+\.\d+ ms measured", out), out
