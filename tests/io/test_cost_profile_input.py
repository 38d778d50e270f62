"""Cost profiles as input: bad files are one-line errors naming the file (and row); rows of submodules below the
workload's ops add up into the op that encloses them; an op timed twice is refused naming both rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.io.costs import apply_costs, read_costs
from placement_dsl.profile import read_profile, with_measured_backward


def layered() -> Graph:
    """Three layer ops as ``import --granularity layer --depth 2`` makes them: module paths ``layers.0`` ..."""
    ops = [Op(name=name, work={"accelerator": 1.0}, attrs={"module": name, "flops": 1e9, "bytes_moved": 1e6})
           for name in ("embed", "layers.0", "layers.1")]
    return Graph(ops, [("embed", "layers.0"), ("layers.0", "layers.1")], name="layered")


def profile_of(tmp_path: Path, text: str, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_all_zero_times_are_refused_naming_the_file(tmp_path):
    path = profile_of(tmp_path, "op,kind,ms\nlayers.0,accelerator,0\nlayers.1,accelerator,0\n")
    with pytest.raises(SpecError) as err:
        apply_costs(layered(), read_costs(path), source=str(path))
    assert "\n" not in str(err.value) and str(path) in str(err.value) and "0 ms" in str(err.value)
    new, fits = apply_costs(layered(), read_costs(path), calibrate_rest=False)  # taken as measured without a fit
    assert new.ops[1].work["accelerator"] == 0.0 and fits == {}


def test_a_zero_scale_of_one_class_is_no_division_by_zero(tmp_path):
    # a memory-bound op measured at 0 and a compute-bound one at 2 ms: the memory scale is 0, an endless bandwidth
    ops = [Op(name="mem", work=1.0, attrs={"flops": 0.0, "bytes_moved": 1e9}),
           Op(name="cmp", work=1.0, attrs={"flops": 1e12, "bytes_moved": 0.0}),
           Op(name="rest", work=1.0, attrs={"flops": 1e12, "bytes_moved": 1e9})]
    g = Graph(ops, [("mem", "cmp"), ("cmp", "rest")])
    new, fits = apply_costs(g, {"mem": {"accelerator": 0.0}, "cmp": {"accelerator": 2.0}})
    assert fits["accelerator"].memory_scale == 0.0
    assert new.ops[2].work["accelerator"] == pytest.approx(2.0, rel=1e-3)  # compute-bound at the measured rate


def test_a_file_that_is_not_utf8_is_refused_naming_it(tmp_path):
    path = tmp_path / "binary.csv"
    path.write_bytes(b"\xff\xfe\x00bad")
    for read in (read_costs, read_profile):
        with pytest.raises(SpecError, match=r"binary\.csv' is not UTF-8 text \(byte 0"):
            read(path)


def test_an_op_timed_twice_is_refused_naming_both_rows(tmp_path):
    path = profile_of(tmp_path, "op,kind,ms\nlayers.0,accelerator,0.5\nlayers.0,accelerator,0.7\n")
    with pytest.raises(SpecError, match=r"p\.csv' line 3: 'layers\.0' on kind 'accelerator' is timed twice "
                                        r"\(first at line 2\)"):
        read_costs(path)
    records = profile_of(tmp_path, json.dumps([{"op": "embed", "ms": 1}, {"op": "embed", "ms": 2}]), "p.json")
    with pytest.raises(SpecError, match=r"record #1: 'embed' .* timed twice \(first at record #0\)"):
        read_costs(records)
    other_kind = profile_of(tmp_path, "op,kind,ms\nembed,accelerator,0.5\nembed,cpu,3\n", "kinds.csv")
    assert read_costs(other_kind) == {"embed": {"accelerator": 0.5, "cpu": 3.0}}  # one row per op and kind


def test_submodule_rows_add_up_into_their_layer(tmp_path):
    # what 'placement-dsl profile' writes (innermost modules) against a workload imported at --depth 2
    rows = ["embed,accelerator,0.5,1.0,0.0,1.0,1", "layers.0.ln,accelerator,0.25,0.5,0.25,0.25,1",
            "layers.0.fc1,accelerator,1.0,2.0,1.0,1.0,1", "layers.1.fc1,accelerator,2.0,4.0,2.0,2.0,1"]
    path = profile_of(tmp_path, "op,kind,ms,backward_ms,input_grad_ms,weight_grad_ms,calls\n" + "\n".join(rows) + "\n")
    new, _ = apply_costs(layered(), read_costs(path), source=str(path))
    assert [op.work["accelerator"] for op in new.ops] == [0.5, 1.25, 2.0]
    (kind, measured), = read_profile(path).items()
    back = with_measured_backward(new, measured, kind)
    assert [op.attrs["backward_work"][kind] for op in back.ops] == [1.0, 2.5, 4.0]


def test_a_layer_and_its_submodule_both_timed_are_refused(tmp_path):
    path = profile_of(tmp_path, "op,kind,ms\nlayers.0,accelerator,1.0\nlayers.0.fc1,accelerator,0.5\n")
    with pytest.raises(SpecError, match=r"times 'layers\.0' and its submodule 'layers\.0\.fc1'"):
        apply_costs(layered(), read_costs(path), source=str(path))


def test_unknown_rows_are_still_refused_naming_the_file(tmp_path):
    path = profile_of(tmp_path, "op,kind,ms\nlayerz.0,accelerator,1.0\n")
    with pytest.raises(SpecError, match=r"p\.csv' names 1 unknown op.*'layerz\.0'"):
        apply_costs(layered(), read_costs(path), source=str(path))
    missing = profile_of(tmp_path, "op,kind,ms\nlayers.7.fc1,accelerator,1.0\n")  # no layer 7 to sum it into
    with pytest.raises(SpecError, match=r"unknown op.*'layers\.7\.fc1'"):
        apply_costs(layered(), read_costs(missing), source=str(missing))


def block_called_around_conv() -> Graph:
    """torchvision's basic block at op granularity: one ``b.relu`` module called before ``b.conv2`` and after the
    residual sum, so that at layer granularity its second call is a layer of its own, ``b.relu_1``."""
    ops = [Op(name=n, work={"accelerator": w}, attrs={"module": m, "flops": w * 1e9, "bytes_moved": 1e6})
           for n, m, w in (("c1", "b.conv1", 4.0), ("r1", "b.relu", 1.0), ("c2", "b.conv2", 4.0), ("add", "b", 1.0),
                           ("r2", "b.relu", 1.0))]
    return Graph(ops, [("c1", "r1"), ("r1", "c2"), ("c2", "add"), ("c1", "add"), ("add", "r2")], name="block")


def test_a_module_called_twice_gives_each_call_its_share_of_the_profiled_time_in_import_and_calibration():
    from placement_dsl.io.costs import layers
    from placement_dsl.profile import ModuleTime

    g = layers(block_called_around_conv())
    assert list(g.names) == ["b.conv1", "b.relu", "b.conv2", "b.relu_1"]
    assert g.ops[g.index["b.relu_1"]].attrs["call_of"] == "b.relu"
    # the profile times every call of b.relu, summed (2 calls): each layer gets its call's share, not the first all
    new, _ = apply_costs(g, {"b.relu": {"accelerator": 3.0}, "b.conv1": {"accelerator": 8.0}})
    assert new.ops[new.index["b.relu"]].work["accelerator"] == pytest.approx(1.5)
    assert new.ops[new.index["b.relu_1"]].work["accelerator"] == pytest.approx(1.5)
    assert sorted(new.ops[new.index["b.relu_1"]].attrs["measured"]) == ["accelerator"]
    rows = [ModuleTime("b.relu", 3.0, 6.0, 4.0, 3.0, 2), ModuleTime("b.conv1", 8.0, 16.0, 8.0, 8.0, 1)]
    back = with_measured_backward(new, rows, "accelerator")  # the calibration's backward: shared alike
    assert back.ops[back.index["b.relu"]].attrs["backward_work"]["accelerator"] == pytest.approx(3.0)
    assert back.ops[back.index["b.relu_1"]].attrs["backward_work"]["accelerator"] == pytest.approx(3.0)
