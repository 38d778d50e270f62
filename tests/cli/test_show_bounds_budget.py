"""``show --kind bounds --time-limit S`` ends by S from the command's start, as ``bounds`` does: its certificate
is given the command's deadline (reading the workload included) less the drawing, not S more from when it starts
(GPT-3's 18,164 ops: 22.2 s on a 10 s limit under load, reading 5 s of it)."""
from __future__ import annotations

import time

from placement_dsl.cli import main
from placement_dsl.viz import bounds

from .test_show_without_split import wide_workload


def test_the_bounds_picture_certifies_within_the_commands_deadline(tmp_path, monkeypatch, capsys):
    given = {}
    real = bounds.certify_over_time

    def spy(problem, **options):
        given.update(options)
        return real(problem, **options)

    monkeypatch.setattr(bounds, "certify_over_time", spy)
    started = time.monotonic()
    code = main(["show", str(wide_workload(tmp_path)), "--kind", "bounds", "--time-limit", "5",
                 "--out", str(tmp_path / "b.svg"), "--json"])
    assert code == 0 and (tmp_path / "b.svg").exists()
    deadline = given.get("deadline")
    assert deadline is not None and deadline.at <= started + 5.0  # no later than the command's own end
