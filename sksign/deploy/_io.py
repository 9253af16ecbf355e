"""One file per packed model: safetensors arrays and a JSON layer graph.

The layout is safetensors' own (8-byte little-endian header length, a JSON
header naming each array's dtype, shape and byte range, then the raw bytes),
written and read here with numpy alone, so the file opens in any safetensors
reader while loading it needs neither torch nor the safetensors package. The
layer graph goes in the header's ``__metadata__`` as a JSON string, with a
SHA-256 digest of the graph and the array bytes. Loading never executes code
(no pickle): it parses JSON, checks every field and copies bytes into numpy
arrays.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import json
import os
import struct
from itertools import pairwise

import numpy as np

from sksign.deploy._format import FORMAT
from sksign.deploy._runtime import PackedNet

__all__ = ["read_packed", "write_packed"]

_DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "U8": np.dtype("u1"),
    "I64": np.dtype("<i8"),
}
_CODES = {v: k for k, v in _DTYPES.items()}
#: Largest header accepted (safetensors' own limit is 100 MB).
MAX_HEADER = 100_000_000


def _digest(graph_json, tensors):
    h = hashlib.sha256(graph_json.encode("utf-8"))
    for key in sorted(tensors):
        arr = tensors[key]
        h.update(key.encode("utf-8"))
        h.update(str(arr.dtype.str).encode())
        h.update(str(arr.shape).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def write_packed(net, path):
    """Write `net` (a :class:`PackedNet`) to `path` in the safetensors layout."""
    tensors = {}
    for key, arr in net.tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
        if dtype not in _CODES:
            raise TypeError(f"tensor {key!r} has unsupported dtype {arr.dtype}.")
        tensors[key] = arr.astype(dtype, copy=False)
    graph_json = json.dumps(net.graph, sort_keys=True, allow_nan=False)
    header = {
        "__metadata__": {
            "format": FORMAT,
            "graph": graph_json,
            "sha256": _digest(graph_json, tensors),
        }
    }
    offset = 0
    for key in sorted(tensors):
        arr = tensors[key]
        header[key] = {
            "dtype": _CODES[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
    raw = json.dumps(header, sort_keys=True).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # align the data on 8 bytes, as safetensors
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for key in sorted(tensors):
            f.write(tensors[key].tobytes())
    os.replace(tmp, path)


def _bad(path, message):
    return ValueError(f"{os.fspath(path)!r} is not a valid packed model: {message}")


def _parse_header(path, data):
    if len(data) < 8:
        raise _bad(path, "the file is shorter than its 8-byte header length.")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER or 8 + n > len(data):
        raise _bad(path, f"header length {n} does not fit the file.")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(path, f"the header is not JSON ({exc}).") from exc
    if not isinstance(header, dict):
        raise _bad(path, "the header is not a JSON object.")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _bad(
            path,
            "its metadata does not name the format "
            f"{FORMAT!r} (a safetensors file of another kind, or not written by "
            "sksign.deploy.save).",
        )
    return header, meta, 8 + n


def read_packed(path):
    """Read and validate a packed model; return its :class:`PackedNet`."""
    with open(path, "rb") as f:
        data = f.read()
    header, meta, start = _parse_header(path, data)
    buffer = memoryview(data)[start:]
    tensors = {}
    spans = []
    for key, entry in header.items():
        if not isinstance(entry, dict) or set(entry) != {
            "dtype",
            "shape",
            "data_offsets",
        }:
            raise _bad(path, f"tensor entry {key!r} is malformed.")
        code = entry["dtype"]
        dtype = _DTYPES.get(code) if isinstance(code, str) else None
        shape, offsets = entry["shape"], entry["data_offsets"]
        if dtype is None:
            raise _bad(path, f"tensor {key!r} has unsupported dtype {code!r}.")
        if (
            not isinstance(shape, list)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53
                for v in [*shape, *offsets]
            )
        ):
            raise _bad(path, f"tensor {key!r} has a malformed shape or offsets.")
        begin, end = offsets
        nbytes = dtype.itemsize
        for v in shape:  # Python integers: no overflow
            nbytes *= v
        if end - begin != nbytes or end > len(buffer):
            raise _bad(
                path, f"the byte range of tensor {key!r} does not match its shape."
            )
        spans.append((begin, end, key))
        arr = np.frombuffer(buffer[begin:end], dtype=dtype).reshape(shape)
        tensors[key] = arr.astype(dtype.newbyteorder("="), copy=True)
    spans.sort()
    for (_, e0, k0), (b1, _, k1) in pairwise(spans):
        if b1 < e0:
            raise _bad(path, f"tensors {k0!r} and {k1!r} overlap.")
    graph_json = meta.get("graph")
    if not isinstance(graph_json, str):
        raise _bad(path, "the metadata lacks the layer graph.")
    if meta.get("sha256") != _digest(graph_json, tensors):
        raise _bad(
            path,
            "its checksum does not match its contents (the file was changed or "
            "truncated after it was written).",
        )
    try:
        graph = json.loads(graph_json)
    except json.JSONDecodeError as exc:  # pragma: no cover - covered by the digest
        raise _bad(path, f"the layer graph is not JSON ({exc}).") from exc
    try:
        return PackedNet(graph, tensors)
    except ValueError as exc:
        raise _bad(path, str(exc)) from exc
