"""``show --kind splits`` prints DeepSpeed's ``parts`` as ``export --to deepspeed`` writes them, and writes text
only."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.export import export
from placement_dsl.io import Workload, save_workload
from placement_dsl.viz import split_lines, split_points

from ..export.test_export import _cut, gpt_like


def test_show_splits_parts_are_the_deepspeed_exporters():
    """show counted its own layers, each module path one ([0, 14, 28] over 28 here), where the exporter wrote
    [0, 3, 6] over 6 entries: embedding, the layers, the head with the final norm."""
    p = _cut(gpt_like(), "h2.ln")
    ds = export(p, "deepspeed").data
    points = split_points(p)
    assert points["parts"] == ds["parts"] == [0, 3, 6] and points["parts_layers"] == ds["layers"]
    assert f"DeepSpeed PipelineModule parts = [0, 3, 6] over {len(ds['layers'])} layers" in split_lines(points)


def test_show_splits_where_deepspeed_refuses_gives_its_reason():
    p = _cut(gpt_like(), "h1.mlp")  # a layer cut between stages
    points = split_points(p)
    assert points["parts"] == [] and any(w.startswith("deepspeed: ") for w in points["warnings"])
    assert "DeepSpeed PipelineModule parts: none, the exporter refuses this plan (see the warning)" in \
        split_lines(points)


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_show_splits_refuses_a_pictures_name(tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str):
    """It wrote the text into x.png and exited 0."""
    work, split = tmp_path / "gpt.json", tmp_path / "split.json"
    save_workload(Workload(gpt_like(), Cluster.stages(2), "native"), work)
    split.write_text(json.dumps(_cut(gpt_like(), "h2.ln").to_dict()))
    out = tmp_path / f"x{suffix}"
    assert main(["show", str(work), "--split", str(split), "--kind", "splits", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"ends in '{suffix}'" in err and len(err.strip().splitlines()) == 1 and not out.exists()
    text = tmp_path / "x.txt"
    assert main(["show", str(work), "--split", str(split), "--kind", "splits", "--out", str(text)]) == 0
    assert "parts = [0, 3, 6] over 6 layers" in text.read_text()
