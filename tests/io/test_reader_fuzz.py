"""Every reader, fuzzed through the command line: bad input is exit 2 with one line naming the file (and, where
the fuzz changed a named field, that field), never an internal error (exit 70), and nothing is left behind.

Readers: native JSON, dnn-partitioning JSON, PipeDream ``graph.txt``, MOIRAI ``.xls`` (byte-level damage of a
copy of ../shared/data/moirai/example-1.xls made in a temporary directory), ONNX (generated models and
damaged bytes) and placement files (dnn-partitioning splits and native assignments).
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cli import main

# ---------------------------------------------------------------------------- running the command line
EXIT_OK, EXIT_ERROR = 0, 2


def run(argv: list[str]) -> tuple[int, str]:
    """Exit status and stderr of ``placement-dsl argv`` (argparse's own refusals included)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, err.getvalue()


def check_refusal(code: int, err: str, path: Path, names: tuple[str, ...] = ()) -> None:
    """Exit 0, or exit 2 with one line naming ``path`` (and one of ``names`` when given)."""
    assert code in (EXIT_OK, EXIT_ERROR), f"exit {code}: {err}"
    if code == EXIT_ERROR:
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert path.name in err, err
        if names:
            assert any(name in err for name in names), (names, err)


def convert(data_file: Path, names: tuple[str, ...] = (), *extra: str) -> int:
    """``convert`` the file to native JSON beside it; a refusal leaves no output (nor a temporary file)."""
    out = data_file.parent / "out.json"
    before = set(data_file.parent.iterdir())
    code, err = run(["convert", str(data_file), str(out), *extra])
    check_refusal(code, err, data_file, names)
    after = set(data_file.parent.iterdir())
    assert after - before == ({out} if code == EXIT_OK else set()), sorted(p.name for p in after - before)
    return code


@contextlib.contextmanager
def scratch() -> Any:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


# ---------------------------------------------------------------------------- JSON mutation
JUNK = st.one_of(
    st.none(), st.booleans(), st.sampled_from([0, -1, 2.7, 10**9, 10**400, 1e308, -1e-300, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4), st.sampled_from(["no", "yes", "two", ""]),
    st.lists(st.integers(-2, 3), max_size=3), st.just({"a": 1}), st.just([{"x": 1}]), st.just(["ab"]),
)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) into a JSON document, its root excluded."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((*prefix, key))
        out.extend(paths(value, (*prefix, key)))
    return out


@st.composite
def mutated(draw: Any, base: dict) -> tuple[dict, tuple]:
    """``base`` with one value replaced by junk, or one key removed; and the path changed."""
    doc = copy.deepcopy(base)
    path = draw(st.sampled_from(paths(doc)))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(JUNK)
    return doc, path


def names_of(doc: Any, path: tuple) -> tuple[str, ...]:
    """What a message about ``path`` may name: the keys along it, and the ids or names of the objects on it."""
    names = [str(k) for k in path if isinstance(k, str)]
    names += [k[:-1] for k in names if k.endswith("s")]  # 'devices': an error about device #0
    node = doc
    for key in path[:-1]:
        node = node[key]
        if isinstance(node, dict):
            names += [str(node[k]) for k in ("id", "name", "sourceId", "destId", "src") if k in node]
    return tuple(names)


def write_json(folder: Path, name: str, data: Any, bom: bool = False) -> Path:
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8-sig" if bom else "utf-8")
    return path


# ---------------------------------------------------------------------------- native JSON
NATIVE = {
    "format": "placement_dsl.workload", "version": 1,
    "graph": {"name": "g", "ops": [{"name": "a", "work": {"accelerator": 1.0, "cpu": 2.0}, "out_bytes": 4.0},
                                   {"name": "b", "work": 2.0, "param_bytes": 3.0, "backward": False, "group": "x"}],
              "edges": [["a", "b"]]},
    "cluster": {"devices": [{"name": "acc0", "memory": 100.0, "bandwidth": 2.0}, {"name": "cpu0", "kind": "cpu"}],
                "links": [{"src": "acc0", "dst": "cpu0", "bandwidth": 1.0, "latency": 0.5}]},
    "meta": {"note": "fuzz"},
}


@given(mutated(NATIVE), st.booleans())
def test_native_json(case, bom):
    doc, path = case
    with scratch() as d:
        convert(write_json(d, "native.json", doc, bom), names_of(doc, path) + ("graph", "cluster", "meta", "format"))


@given(st.sampled_from(["[" * 100_000, '{"graph": ' + "[" * 5000 + "]" * 5000 + "}", "{", '{"graph": 1e999}',
                        '{"graph": {"ops": [{"name": "a", "work": ' + "9" * 5000 + "}]}}", "\ufeff{}", "\x00\xff"]))
def test_native_json_text(text):
    with scratch() as d:
        path = d / "text.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        convert(path)


# ---------------------------------------------------------------------------- dnn-partitioning
DNN = {
    "maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1,
    "nodes": [{"id": 1, "supportedOnFpga": 1, "cpuLatency": 5.0, "fpgaLatency": 1.0, "isBackwardNode": 0,
               "colorClass": 1, "size": 4.0},
              {"id": 2, "supportedOnFpga": 0, "cpuLatency": 6.0, "fpgaLatency": 2.0, "isBackwardNode": 0,
               "size": 3.0}],
    "edges": [{"sourceId": 1, "destId": 2, "cost": 3.0}],
}


@given(mutated(DNN))
def test_dnn_partitioning(case):
    doc, path = case
    with scratch() as d:
        convert(write_json(d, "dnn.json", doc), names_of(doc, path) + ("nodes", "edges"),
                "--format", "dnn-partitioning")


# ---------------------------------------------------------------------------- placement files
SPLIT = {"fpgas": [{"nodes": [1]}, {"nodes": []}], "cpus": [{"nodes": [2]}]}
ASSIGNMENT = {"format": "placement_dsl.placement", "version": 1, "assignment": {"1": "acc0", "2": "cpu0"}}


@given(st.one_of(mutated(SPLIT), mutated(ASSIGNMENT)))
def test_split_files(case):
    doc, _ = case
    with scratch() as d:
        workload = write_json(d, "dnn.json", DNN)
        split = write_json(d, "split.json", doc)
        code, err = run(["evaluate", str(workload), "--split", str(split)])
        check_refusal(code, err, split)
        assert sorted(p.name for p in d.iterdir()) == ["dnn.json", "split.json"]


# ---------------------------------------------------------------------------- PipeDream
NUMBER = st.one_of(st.sampled_from(["1.5", "0", "-1", "nan", "inf", "1e400", "[1; 2]", "[1;", "abc", "", "1e308"]),
                   st.floats(0, 100).map(repr))


@st.composite
def profiles(draw: Any) -> str:
    names = [f"node{i}" for i in range(draw(st.integers(1, 4)))]
    lines = []
    for name in names:
        fields = {k: draw(NUMBER) for k in ("forward_compute_time", "backward_compute_time", "activation_size",
                                            "parameter_size")}
        if draw(st.booleans()) and draw(st.booleans()):
            fields.pop(draw(st.sampled_from(sorted(fields))))
        lines.append(f"{name} -- Op -- " + ", ".join(f"{k}={v}" for k, v in fields.items()))
        for _ in range(draw(st.integers(0, 2))):
            src = draw(st.sampled_from([*names, "ghost", name]))
            lines.append(f"\t{src} -- {name}")
    if draw(st.booleans()):
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(st.sampled_from(["garbage", "\tnode0", "x -- y -- z", "node9 -- Op -- forward"])))
    return "\n".join(lines) + "\n"


@given(profiles(), st.booleans())
def test_pipedream(text, training):
    with scratch() as d:
        path = d / "graph.txt"
        path.write_text(text)
        convert(path, (), "--format", "pipedream", *(["--training"] if training else []))


# ---------------------------------------------------------------------------- MOIRAI
@pytest.fixture(scope="module")
def sheet(shared_data: Path) -> bytes:
    """example-1.xls as bytes: damaged copies are written to temporary directories only."""
    pytest.importorskip("xlrd")
    path = shared_data / "moirai" / "example-1.xls"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path.read_bytes()


DAMAGE = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 75_000)),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, 75_000), st.integers(0, 255)), min_size=1,
                                        max_size=12)),
)


@settings(max_examples=25)
@given(damage=DAMAGE)
def test_moirai(sheet, damage):
    data = bytearray(sheet)
    kind, how = damage
    if kind == "truncate":
        data = data[:how]
    else:
        for at, byte in how:
            data[at % len(data)] = byte
    with scratch() as d:
        path = d / "sheet.xls"
        path.write_bytes(bytes(data))
        convert(path)


# ---------------------------------------------------------------------------- ONNX
try:
    from onnx import TensorProto, helper
except ImportError:  # the other readers are fuzzed all the same
    helper = None

DIM = st.one_of(st.integers(1, 4), st.sampled_from([0, -5, -1, 2**62, 2**40]), st.sampled_from(["batch", "n"]))


@st.composite
def onnx_models(draw: Any) -> bytes:
    """A small model of Relu/Add/MatMul nodes wired to existing, later, self or missing tensors."""
    shape = draw(st.lists(DIM, min_size=1, max_size=3))
    tensors = ["x"]
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["Relu", "Add", "MatMul", "Sigmoid"]))
        pool = [*tensors, f"t{i}", f"t{i + 1}", "ghost"]
        inputs = [draw(st.sampled_from(pool)) for _ in range(1 if op in ("Relu", "Sigmoid") else 2)]
        nodes.append(helper.make_node(op, inputs, [f"t{i}"], name=f"n{i}"))
        tensors.append(f"t{i}")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info(tensors[-1], TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "fuzz", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 20)])
    return model.SerializeToString()


@pytest.mark.skipif(helper is None, reason="needs the onnx package")
@given(onnx_models(), st.one_of(st.none(), st.integers(0, 400), st.tuples(st.integers(0, 400), st.integers(0, 255))))
def test_onnx(model, damage):
    data = bytearray(model)
    if isinstance(damage, int):
        data = data[:damage]
    elif damage is not None:
        data[damage[0] % max(len(data), 1)] = damage[1]
    with scratch() as d:
        path = d / "model.onnx"
        path.write_bytes(bytes(data))
        convert(path)

