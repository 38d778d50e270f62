"""Reading a workload with Python's cycle collector paused, and the command's workload kept out of its sight.

Reading 20,000 ops allocates tens of thousands of records that form no cycles, and each collection their
allocations set off walked all of them: 0.33 s of CPU against 0.22 s with the collector paused. Once read, the
command's workload lives as long as its process: frozen (``gc.freeze``), later collections and the forked
children's do not walk it again.
"""
from __future__ import annotations

import gc

from placement_dsl.cli import build_parser
from placement_dsl.cli.workloads import workload_from_args
from placement_dsl.io import save_workload, workload
from placement_dsl.zoo import gpt3


def test_the_collector_is_paused_while_reading_and_runs_again_after(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    save_workload(gpt3(layers=1, hidden=64, heads=2, vocab=128), path)
    seen = []
    real = workload.workload_from_dict

    def recording(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)
    monkeypatch.setattr(workload, "workload_from_dict", recording)
    assert gc.isenabled()
    workload.load_workload(path)
    assert seen == [False] and gc.isenabled()


def test_the_command_s_own_process_freezes_its_workload_and_a_caller_s_does_not(tmp_path):
    path = tmp_path / "g.json"
    save_workload(gpt3(layers=1, hidden=64, heads=2, vocab=128), path)
    args = build_parser("bounds").parse_args(["bounds", str(path), "--stages", "2"])
    gc.unfreeze()
    try:
        workload_from_args(args)  # a caller's process (main(argv), a test): its collector is left alone
        assert gc.get_freeze_count() == 0
        args.own_process = True
        w = workload_from_args(args)
        assert gc.get_freeze_count() > 0 and w.graph.n > 0
    finally:
        gc.unfreeze()
