"""An ONNX model without its weights: read from a file by skipping their bytes, or copied from a loaded model.

The importer needs every tensor's shape, never a weight's values, yet ``onnx.load`` holds the
file's bytes and the parsed model at once, and ONNX shape inference serializes and parses its
model again: importing a ViT-B/16 of 330 MiB of inline weights peaked at 2.4 GiB (7x).

:func:`read` walks the file's protobuf wire format (``ModelProto`` -> ``graph`` -> ``initializer``
/ ``node`` -> ``attribute`` -> tensor) with ordinary buffered reads. A field of at most
:data:`SMALL` bytes is read whole; a larger tensor keeps its name, dims, type and metadata, its
values (``raw_data`` and the typed ``*_data`` fields) are seeked over and it is marked
``data_location = EXTERNAL``, as ``onnx.load(..., load_external_data=False)`` leaves an external
weight. Only the model's structure is ever in memory. :func:`weightless` makes the same copy of a
model already loaded, for shape inference.
"""
from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

SMALL = 1 << 16  # bytes: a field this size or smaller is read whole (a shape constant, a bias, a name)
TENSOR_DATA = frozenset({4, 5, 6, 7, 9, 10, 11})  # TensorProto's float/int32/string/int64/raw/double/uint64 data
EXTERNAL = bytes([14 << 3, 1])  # TensorProto field 14 (data_location), varint 1 (EXTERNAL)
# the messages walked into, by field number: ModelProto.graph; GraphProto.node and .initializer;
# NodeProto.attribute; AttributeProto.t, .g, .tensors and .graphs
CHILDREN: dict[str, dict[int, str]] = {
    "model": {7: "graph"},
    "graph": {1: "node", 5: "tensor"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 11: "tensor", 12: "graph"},
    "tensor": {},
}


class WireError(ValueError):
    """The bytes are not a protobuf message (a bad wire type, a field past the end)."""


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


@dataclass
class _Reader:
    """Reads fields from ``file`` up to known ends; counts the tensor bytes it skipped."""

    file: BinaryIO
    skipped: int = 0

    def exactly(self, n: int) -> bytes:
        data = self.file.read(n)
        if len(data) != n:
            raise WireError(f"the file ends {n - len(data)} bytes early")
        return data

    def varint(self) -> tuple[int, bytes]:
        """A varint's value and its bytes."""
        raw = bytearray()
        while True:
            byte = self.exactly(1)[0]
            raw.append(byte)
            if byte < 0x80:
                break
            if len(raw) >= 10:
                raise WireError("a varint longer than 10 bytes")
        return sum((b & 0x7F) << (7 * i) for i, b in enumerate(raw)), bytes(raw)

    def message(self, kind: str, end: int) -> bytes:
        """The fields of a ``kind`` message from here to ``end``, large tensors' values left out."""
        out = bytearray()
        stripped = False
        while self.file.tell() < end:
            key, key_raw = self.varint()
            number, wire = key >> 3, key & 7
            drop = kind == "tensor" and number in TENSOR_DATA
            if wire == 0:
                field = self.varint()[1]
            elif wire in (1, 5):
                field = self.exactly(8 if wire == 1 else 4)
            elif wire == 2:
                length, length_raw = self.varint()
                start = self.file.tell()
                if start + length > end:
                    raise WireError(f"field {number} of a {kind} runs {start + length - end} bytes past its end")
                if drop:
                    self.file.seek(length, os.SEEK_CUR)
                    self.skipped += length
                    field = b""
                elif length > SMALL and number in CHILDREN[kind]:
                    body = self.message(CHILDREN[kind][number], start + length)
                    field = _varint_bytes(len(body)) + body
                else:
                    field = length_raw + self.exactly(length)
            else:
                raise WireError(f"wire type {wire} in field {number} of a {kind}")
            stripped |= drop
            if not drop:
                out += key_raw + field
        if self.file.tell() != end:
            raise WireError(f"a {kind} runs past its end")
        return bytes(out + EXTERNAL) if stripped else bytes(out)


def read(path: str | Path) -> tuple[Any, int]:
    """The ``ModelProto`` in ``path`` without the values of tensors over :data:`SMALL` bytes, and their bytes.

    Raises :class:`WireError` when the file is not protobuf, and protobuf's own error when the
    fields it holds are not a ``ModelProto``.
    """
    from onnx import ModelProto

    with open(path, "rb", buffering=io.DEFAULT_BUFFER_SIZE) as file:
        size = os.fstat(file.fileno()).st_size
        reader = _Reader(file)
        body = reader.message("model", size)
    return ModelProto.FromString(body), reader.skipped


def _tensor(tensor: Any) -> Any:
    """``tensor`` itself when small; else its name, dims and type, marked external."""
    from onnx import TensorProto

    if tensor.ByteSize() <= SMALL or tensor.data_location == TensorProto.EXTERNAL:
        return tensor
    return TensorProto(name=tensor.name, dims=tensor.dims, data_type=tensor.data_type,
                       data_location=TensorProto.EXTERNAL)


def weightless(model: Any) -> Any:
    """What shape inference reads of ``model``, initializers over :data:`SMALL` bytes keeping their shape and type.

    That is the IR version, the opsets, the functions and the graph's nodes, inputs, outputs,
    value infos and initializers (a ``Constant`` node keeps its value); names and documentation
    are left out. It costs the model's structure, not its weights.
    """
    from onnx import ModelProto

    out = ModelProto(ir_version=model.ir_version)
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    graph, source = out.graph, model.graph
    for name in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(graph, name).extend(getattr(source, name))
    graph.initializer.extend(_tensor(t) for t in source.initializer)
    return out


def values(tensor: Any, folder: Path | None) -> Any:
    """The values of ``tensor`` (a numpy array): held in the model, or read from its external data file, whose
    ``location`` lies under ``folder`` (the model file's); ``None`` where :func:`read` skipped them or they cannot be
    read."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    try:
        if tensor.data_location != TensorProto.EXTERNAL:
            return numpy_helper.to_array(tensor)
        info = {entry.key: entry.value for entry in tensor.external_data}
        if folder is None or "location" not in info:
            return None
        path = (Path(folder) / info["location"]).resolve()
        if Path(folder).resolve() not in path.parents:
            return None
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
        count = math.prod(int(d) for d in tensor.dims)
        with open(path, "rb") as file:
            file.seek(int(info.get("offset", 0)))
            data = file.read(count * dtype.itemsize)
        return np.frombuffer(data, dtype=dtype, count=count).reshape([int(d) for d in tensor.dims])
    except (OSError, ValueError, TypeError, KeyError):  # a missing file, a short one, a type numpy has not
        return None
