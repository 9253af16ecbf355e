"""The packed layer graph: its operations, validation and forward pass.

A packed net is a list of layers, each an operation (``op``) that reads named
values and writes one. Values are either float rows (``float``: float32
arrays of shape ``(n_rows, width)``) or packed bits (``bits``: uint64 words
of shape ``(n_rows, ceil(width / 64))``, see :mod:`sksign.deploy.kernels`).
Spiking layers fold time into the rows (row ``n * T + t``). Numpy and numba
only: no torch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
from itertools import pairwise

import numpy as np

from sksign._threads import run_in_threads
from sksign.deploy._maps import (
    GATES,
    MAP_OPS,
    NEURONS,
    conv_corrections,
    fire_maps,
    gate_pixels,
    im2col,
    map_geometry,
    pack_pixels,
    unpack_pixels,
    words_per_pixel,
)
from sksign.deploy.kernels import (
    bit_accumulate,
    count_bits,
    if_neuron_pack,
    pack_ge,
    step_certified,
    step_int16,
    unpack_words,
    xnor_affine,
)
from sksign.kernels import packed_to_words

__all__ = ["FORMAT", "OPS", "VERSION", "PackedNet"]

#: Name and version of the file format (checked on load).
FORMAT = "sksign-packed"
VERSION = 1

# For each op: (input kind, output kind, number of inputs (None: one or more),
# required attributes with their types, tensors as name -> (dtype, shape
# template)). Shape templates use "in" (input width), "out" (output width),
# "in_bytes" (ceil(in / 8)).
_CONV2D = {
    "shape": list,
    "channels": int,
    "kernel": int,
    "stride": int,
    "padding": int,
    "out": int,
}
OPS = {
    "dense": (
        "float",
        "float",
        1,
        {"out": int, "float64": bool},
        {"weight": ("float32", ("out", "in")), "bias": ("float32", ("out",))},
    ),
    "batch_norm": (
        "float",
        "float",
        1,
        {},
        {"scale": ("float32", ("in",)), "shift": ("float32", ("in",))},
    ),
    "relu": ("float", "float", 1, {}, {}),
    "step": ("float", "bits", 1, {}, {}),
    "add": ("float", "float", 2, {}, {}),
    "bit_dense": (
        "bits",
        "float",
        None,
        {"out": int, "float64": bool},
        {"weight_t": ("float32", ("in", "out")), "bias": ("float32", ("out",))},
    ),
    "bit_dense_step": (
        "bits",
        "bits",
        1,
        {"out": int},
        {
            "weight_t": ("float32", ("in", "out")),
            "threshold": ("float32", ("out",)),
        },
    ),
    "xnor_dense": (
        "bits",
        "float",
        1,
        {"out": int},
        {
            "weight_bits": ("uint8", ("out", "in_bytes")),
            "alpha": ("float32", ("out",)),
            "beta": ("float32", ("out",)),
        },
    ),
    "if_neuron": (
        "float",
        "bits",
        1,
        {"time_steps": int, "threshold": float, "reset": str, "constant": bool},
        {},
    ),
    "time_mean": ("float", "float", 1, {"time_steps": int}, {}),
    # images: values hold (channels, height, width) maps flattened in that
    # order (as torch's Flatten); "shape" is the input's (C, H, W)
    "conv": (
        "float",
        "float",
        1,
        {"shape": list, "channels": int, "kernel": int, "padding": int, "out": int},
        {"weight": ("float32", ("oc", "patch")), "bias": ("float32", ("oc",))},
    ),
    "bit_conv_step": (
        "bits",
        "bits",
        1,
        {"shape": list, "channels": int, "kernel": int, "padding": int, "out": int},
        {
            "weight_t": ("float32", ("patch", "oc")),
            "threshold": ("float32", ("oc",)),
        },
    ),
    "max_pool": ("bits", "bits", 1, {"shape": list, "out": int}, {}),
    # channels-last maps of the residual image nets (see _maps): "shape" is
    # the input's (C, H, W); "pixel_bits" are the channel bits of each pixel
    # packed into ceil(C / 64) words
    "to_nhwc": ("float", "float", 1, {"shape": list}, {}),
    "channel_affine": (
        "float",
        "float",
        1,
        {"shape": list},
        {"scale": ("float32", ("c_in",)), "shift": ("float32", ("c_in",))},
    ),
    "pixel_step": ("float", "pixel_bits", 1, {"shape": list}, {}),
    "pixel_unpack": ("pixel_bits", "float", 1, {"shape": list}, {}),
    "conv2d": (
        "float",
        "float",
        1,
        _CONV2D,
        {"weight": ("float32", ("oc", "patch")), "bias": ("float32", ("oc",))},
    ),
    "xnor_conv2d": (
        "pixel_bits",
        "float",
        1,
        _CONV2D,
        {
            "weight_bits": ("uint8", ("oc", "patch_bytes")),
            "alpha": ("float32", ("oc",)),
            "beta": ("float32", ("oc",)),
        },
    ),
    "bit_conv2d": (
        "pixel_bits",
        "float",
        1,
        _CONV2D,
        {"weight_t": ("float32", ("patch", "oc")), "bias": ("float32", ("oc",))},
    ),
    "bit_conv2d_step": (
        "pixel_bits",
        "pixel_bits",
        1,
        _CONV2D,
        {
            "weight_t": ("float32", ("patch", "oc")),
            "threshold": ("float32", ("oc",)),
        },
    ),
    "avg_pool2d": ("float", "float", 1, {"shape": list, "kernel": int, "out": int}, {}),
    "global_avg_pool": ("float", "float", 1, {"shape": list, "out": int}, {}),
    "bit_global_avg_pool": ("pixel_bits", "float", 1, {"shape": list, "out": int}, {}),
    # spiking maps (SEW-ResNet), time folded into the rows (row n * T + t)
    "pixel_neuron": (
        "float",
        "pixel_bits",
        1,
        {
            "shape": list,
            "time_steps": int,
            "threshold": float,
            "reset": str,
            "constant": bool,
            "neuron": str,
            "tau": float,
        },
        {},
    ),
    "pixel_gate": ("pixel_bits", "pixel_bits", 2, {"shape": list, "connect": str}, {}),
}

_RESETS = ("subtract", "zero")
#: Largest number of simulation steps a packed spiking layer may declare.
MAX_TIME_STEPS = 10_000

#: From this many rows on, real weights on bits go through a BLAS matrix
#: product of the unpacked 0/1 rows; below it, the weight rows of the active
#: bits are summed (measured: the sum wins for a few rows, where the product
#: is bound by reading the weights, and loses once the product is compute
#: bound).
BLAS_MIN_ROWS = 8
#: Layers with fewer multiply-accumulates (rows x inputs x outputs) than this
#: run on one thread.
PARALLEL_MIN_WORK = 2**22
#: Below this share of 1 bits (sparse spikes), summing the active weight rows
#: beats the matrix product at any batch size (it costs in proportion to the
#: active bits, the product does not).
SPARSE_DENSITY = 0.2
#: Samples of an image net run together (its feature maps take memory in
#: proportion to the batch).
MAP_CHUNK = 64


def _density(words, width):
    """Share of 1 bits among the `width` units of each row of `words`."""
    return count_bits(words) / max(1, words.shape[0] * width)


def _split(n, parts):
    """``parts`` contiguous ranges covering ``range(n)`` (none empty)."""
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(a, b) for a, b in pairwise(bounds) if b > a]


def _run_rows_cols(kernel, n_rows, n_cols, n_threads, *args):
    """Run ``kernel(*args, r0, r1, c0, c1)`` split over rows (or columns)."""
    if n_threads <= 1:
        kernel(*args, 0, n_rows, 0, n_cols)
        return
    if n_rows >= 4 * n_threads:
        tasks = [(*args, a, b, 0, n_cols) for a, b in _split(n_rows, n_threads)]
    else:
        tasks = [(*args, 0, n_rows, a, b) for a, b in _split(n_cols, n_threads)]
    run_in_threads(kernel, tasks, n_threads)


def _run_rows(kernel, n_rows, n_threads, *args):
    if n_threads <= 1 or n_rows == 1:
        kernel(*args, 0, n_rows)
        return
    tasks = [(*args, a, b) for a, b in _split(n_rows, n_threads)]
    run_in_threads(kernel, tasks, n_threads)


def _schema_error(message):
    return ValueError(f"Not a valid packed model: {message}")


def _check_attr(layer, key, kind):
    attrs = layer.get("attrs", {})
    if key not in attrs:
        raise _schema_error(f"layer {layer.get('name')!r} lacks attribute {key!r}.")
    value = attrs[key]
    ok = (
        isinstance(value, bool)
        if kind is bool
        else isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is float
        else isinstance(value, kind) and not isinstance(value, bool)
        if kind is int
        else isinstance(value, kind)
    )
    if not ok:
        raise _schema_error(
            f"attribute {key!r} of layer {layer.get('name')!r} must be "
            f"{kind.__name__}; got {value!r}."
        )
    return value


def _conv_geometry(shape, kernel, padding):
    """Output height and width of a stride-1 convolution."""
    _, h, w = shape
    return h + 2 * padding - kernel + 1, w + 2 * padding - kernel + 1


def _check_image_layer(name, op, attrs, width, out_width):
    """Shape dims of a conv or pooling layer; raise if they do not add up."""
    shape = attrs["shape"]
    if (
        len(shape) != 3
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape)
        or min(shape) < 1
        or shape[0] * shape[1] * shape[2] != width
    ):
        raise _schema_error(
            f"layer {name!r}: shape {shape!r} does not describe its {width} inputs."
        )
    if op == "max_pool":
        expected = shape[0] * (shape[1] // 2) * (shape[2] // 2)
        dims = {}
    else:
        k, p, oc = attrs["kernel"], attrs["padding"], attrs["channels"]
        if k < 1 or p < 0 or oc < 1:
            raise _schema_error(f"layer {name!r} has an invalid kernel or padding.")
        h, w = _conv_geometry(shape, k, p)
        expected = oc * h * w
        dims = {"oc": oc, "patch": shape[0] * k * k}
    if expected != out_width or expected < 1:
        raise _schema_error(
            f"layer {name!r}: {out_width} outputs do not match its geometry."
        )
    return dims


def _check_map_layer(name, op, attrs, width, out_width, known):
    """Dims of a channels-last map layer; raise if its sizes do not add up.

    `known` is the ``(C, H, W)`` of the input when an earlier map layer
    wrote it (the layer must then read it with that shape), else None.
    """
    shape = attrs["shape"]
    if (
        len(shape) != 3
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape)
        or min(shape) < 1
        or shape[0] * shape[1] * shape[2] != width
    ):
        raise _schema_error(
            f"layer {name!r}: shape {shape!r} does not describe its {width} inputs."
        )
    if known is not None and tuple(shape) != tuple(known):
        raise _schema_error(
            f"layer {name!r} reads maps of shape {list(known)} as {shape!r}."
        )
    try:
        c_out, h, w = map_geometry(op, shape, attrs)
    except ValueError as exc:
        raise _schema_error(f"layer {name!r}: {exc}.") from None
    if c_out * h * w != out_width:
        raise _schema_error(
            f"layer {name!r}: {out_width} outputs do not match its geometry."
        )
    c = shape[0]
    k = attrs.get("kernel", 1)
    dims = {"c_in": c, "oc": c_out, "patch": k * k * c}
    dims["patch_bytes"] = k * k * 8 * words_per_pixel(c)
    return dims, (c_out, h, w)


def validate_graph(graph, tensors):
    """Check a layer graph against its tensors; return the output width.

    Every layer's op must be known, its inputs defined before it and of the
    kind the op reads, its attributes present with the right types, and its
    tensors present with the dtype and shape the widths imply. Raises a
    ValueError naming the first problem.
    """
    n_features = graph.get("n_features_in")
    if not isinstance(n_features, int) or isinstance(n_features, bool):
        raise _schema_error("'n_features_in' must be an integer.")
    if n_features < 1:
        raise _schema_error(f"'n_features_in' must be >= 1; got {n_features}.")
    layers = graph.get("layers")
    if not isinstance(layers, list) or not layers:
        raise _schema_error("'layers' must be a non-empty list.")
    # name -> (kind, width, rows per sample)
    values = {"input": ("float", n_features, 1)}
    shapes = {}  # (C, H, W) of the maps that map layers wrote
    used = set()
    for layer in layers:
        if not isinstance(layer, dict):
            raise _schema_error("every layer must be a JSON object.")
        name, op = layer.get("name"), layer.get("op")
        if not isinstance(op, str) or op not in OPS:
            raise _schema_error(
                f"layer {name!r} has unknown op {op!r}; known ops: {sorted(OPS)}."
            )
        in_kind, out_kind, n_inputs, attrs, specs = OPS[op]
        inputs = layer.get("inputs")
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(s, str) for s in inputs)
        ):
            raise _schema_error(f"layer {name!r} must list its inputs by name.")
        if not isinstance(layer.get("attrs", {}), dict):
            raise _schema_error(f"layer {name!r}: 'attrs' must be a JSON object.")
        if n_inputs is not None and len(inputs) != n_inputs:
            raise _schema_error(
                f"layer {name!r} ({op}) takes {n_inputs} input(s); got {len(inputs)}."
            )
        for src in inputs:
            if src not in values:
                raise _schema_error(
                    f"layer {name!r} reads {src!r}, which no earlier layer writes."
                )
        kinds = {values[s][0] for s in inputs}
        widths = {values[s][1] for s in inputs}
        rows = {values[s][2] for s in inputs}
        if kinds != {in_kind} or len(widths) != 1 or len(rows) != 1:
            raise _schema_error(
                f"layer {name!r} ({op}) needs {in_kind} inputs of one width; got "
                f"{[values[s][:2] for s in inputs]}."
            )
        width, per_sample = widths.pop(), rows.pop()
        for key, kind in attrs.items():
            _check_attr(layer, key, kind)
        a = layer.get("attrs", {})
        out_width = a.get("out", width)
        if out_width < 1:
            raise _schema_error(f"layer {name!r} has an output width < 1.")
        dims = {"in": width, "out": out_width, "in_bytes": -(-width // 8)}
        out_shape = None
        if op in MAP_OPS:
            known = {shapes.get(s) for s in inputs}
            if len(known - {None}) > 1:
                raise _schema_error(
                    f"layer {name!r} reads maps of different shapes "
                    f"{sorted(known - {None})}."
                )
            extra, out_shape = _check_map_layer(
                name, op, a, width, out_width, known.pop() if len(known) == 1 else None
            )
            dims.update(extra)
        elif op in ("conv", "bit_conv_step", "max_pool"):
            dims.update(_check_image_layer(name, op, a, width, out_width))
        elif op == "add" and len({shapes.get(s) for s in inputs}) == 1:
            out_shape = shapes.get(inputs[0])
        names = layer.get("tensors", {})
        if (
            not isinstance(names, dict)
            or set(names) != set(specs)
            or not all(isinstance(v, str) for v in names.values())
        ):
            raise _schema_error(
                f"layer {name!r} ({op}) must name the tensors {sorted(specs)}; "
                f"got {sorted(names) if isinstance(names, dict) else names!r}."
            )
        for key, (dtype, template) in specs.items():
            t = tensors.get(names[key])
            if t is None:
                raise _schema_error(
                    f"tensor {names[key]!r} of layer {name!r} is missing."
                )
            shape = tuple(dims[d] for d in template)
            if t.dtype != np.dtype(dtype) or t.shape != shape:
                raise _schema_error(
                    f"tensor {names[key]!r} of layer {name!r} must be {dtype} of "
                    f"shape {shape}; got {t.dtype} of shape {t.shape}."
                )
            used.add(names[key])
        if op == "pixel_neuron" and (
            a["neuron"] not in NEURONS or not np.isfinite(a["tau"]) or a["tau"] <= 0
        ):
            raise _schema_error(f"layer {name!r} has invalid neuron attributes.")
        if op == "pixel_gate" and a["connect"] not in GATES:
            raise _schema_error(
                f"layer {name!r}: connect {a['connect']!r} is not one of {GATES}."
            )
        if op in ("if_neuron", "pixel_neuron"):
            if not 1 <= a["time_steps"] <= MAX_TIME_STEPS or a["reset"] not in _RESETS:
                raise _schema_error(f"layer {name!r} has invalid neuron attributes.")
            if not a["constant"] and per_sample != a["time_steps"]:
                raise _schema_error(
                    f"layer {name!r} simulates {a['time_steps']} steps of an input "
                    f"with {per_sample} rows per sample."
                )
            if not np.isfinite(a["threshold"]) or a["threshold"] <= 0:
                raise _schema_error(f"layer {name!r} needs a positive threshold.")
            if a["constant"] and per_sample != 1:
                raise _schema_error(
                    f"layer {name!r}: 'constant' contradicts its input."
                )
            per_sample = a["time_steps"]
        if op == "time_mean":
            if a["time_steps"] != per_sample:
                raise _schema_error(
                    f"layer {name!r} averages the wrong number of steps."
                )
            per_sample = 1
        output = layer.get("output")
        if not isinstance(output, str) or output in values:
            raise _schema_error(f"layer {name!r} must write a new value name.")
        values[output] = (out_kind, out_width, per_sample)
        if out_shape is not None:
            shapes[output] = tuple(out_shape)
    out = graph.get("output")
    if (
        not isinstance(out, str)
        or out not in values
        or values[out][0] != "float"
        or values[out][2] != 1
    ):
        raise _schema_error("'output' must name a float value with one row per sample.")
    extra = set(tensors) - used - {"target_mean", "target_scale"}
    if extra:
        raise _schema_error(f"unexpected tensors {sorted(extra)}.")
    return values[out][1]


def _pack_rows(bits):
    """uint64 words of a 2-D array of 0/1 values (unit layout of the kernels)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint8)
    return packed_to_words(np.packbits(bits, axis=1), bits.shape[1])


def _patches(x, attrs):
    """im2col: rows of ``(C, k, k)`` patches, one per sample and output pixel."""
    c, h, w = attrs["shape"]
    k, p = attrs["kernel"], attrs["padding"]
    maps = x.reshape(-1, c, h, w)
    if p:
        maps = np.pad(maps, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(maps, (k, k), axis=(2, 3))
    ho, wo = win.shape[2], win.shape[3]
    # (n, C, Ho, Wo, k, k) -> (n, Ho, Wo, C, k, k): a patch in torch's weight order
    patches = win.transpose(0, 2, 3, 1, 4, 5).reshape(-1, c * k * k)
    return np.ascontiguousarray(patches), (ho, wo)


def _channels_first(rows, n, h, w):
    """``(n * h * w, channels)`` rows as ``(n, channels * h * w)`` maps."""
    return np.ascontiguousarray(
        rows.reshape(n, h, w, -1).transpose(0, 3, 1, 2).reshape(n, -1)
    )


def _quantise(wt):
    """16-bit weights of a layer followed by a step, and what certifies them.

    Returns ``(q, scale, abs_sum, w_rows)``: ``q = rint(wt / scale)`` as
    int16 with ``scale = max |wt| / 32767`` per output (so
    ``|wt - q * scale| <= scale / 2``), ``sum |wt|`` per output, and the
    float32 weights one row per output (for the rare exact sums).
    """
    w64 = wt.astype(np.float64)
    top = np.abs(w64).max(axis=0) if len(w64) else np.zeros(wt.shape[1])
    scale = np.where(top > 0, top / 32767.0, 1.0)
    q = np.clip(np.rint(w64 / scale), -32767, 32767).astype(np.int16)
    abs_sum = np.abs(w64).sum(axis=0)
    return np.ascontiguousarray(q), scale, abs_sum, np.ascontiguousarray(wt.T)


class PackedNet:
    """A packed layer graph and its arrays, ready to run on numpy and numba.

    Made by :func:`sksign.deploy.pack` and read back by
    :func:`sksign.deploy.load`; a :class:`~sksign.deploy.PackedClassifier` or
    :class:`~sksign.deploy.PackedRegressor` wraps it. The graph is a dict that
    serialises to JSON (the file's header), the arrays a dict of numpy
    arrays (the file's tensors). Both are validated on construction.

    Parameters
    ----------
    graph : dict
        The header: ``format``, ``version``, ``estimator`` ("classifier" or
        "regressor"), ``n_features_in``, ``layers`` (list of layer dicts with
        ``name``, ``op``, ``inputs``, ``output``, ``attrs``, ``tensors``),
        ``output`` and the estimator's metadata (``classes``, ...).
    tensors : dict of str to ndarray
        The arrays the layers name.

    Attributes
    ----------
    n_outputs_ : int
        Width of the net's output (classes, or regression targets).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.deploy import PackedNet
    >>> graph = {"format": "sksign-packed", "version": 1,
    ...          "estimator": "regressor", "n_features_in": 2, "output": "h",
    ...          "layers": [{"name": "fc", "op": "dense", "inputs": ["input"],
    ...                      "output": "h", "attrs": {"out": 1, "float64": False},
    ...                      "tensors": {"weight": "w", "bias": "b"}}]}
    >>> net = PackedNet(graph, {"w": np.ones((1, 2), np.float32),
    ...                         "b": np.zeros(1, np.float32)})
    >>> net.forward(np.array([[1.0, 2.0]], np.float32))
    array([[3.]], dtype=float32)
    """

    def __init__(self, graph, tensors):
        if not isinstance(graph, dict):
            raise _schema_error("the header must be a JSON object.")
        if graph.get("format") != FORMAT:
            raise _schema_error(
                f"format {graph.get('format')!r} is not {FORMAT!r} (a file "
                "written by sksign.deploy.save)."
            )
        if graph.get("version") != VERSION:
            raise _schema_error(
                f"version {graph.get('version')!r} is not supported (expected "
                f"{VERSION})."
            )
        if graph.get("estimator") not in ("classifier", "regressor"):
            raise _schema_error("'estimator' must be 'classifier' or 'regressor'.")
        tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
        for key, arr in tensors.items():
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise _schema_error(f"tensor {key!r} holds NaN or infinity.")
        self.n_outputs_ = validate_graph(graph, tensors)
        self.graph = copy.deepcopy(graph)
        self.tensors = tensors
        self._prepare()

    def _prepare(self):
        """Words of the binary weights and float64 copies of float layers.

        Derived arrays, kept out of the saved tensors.
        """
        self._words, self._wide, self._wide_dense, self._zeros = {}, {}, {}, {}
        self._steps, self._corr, self._shapes = {}, {}, {}
        widths = {"input": self.graph["n_features_in"]}
        for layer in self.graph["layers"]:
            width = widths[layer["inputs"][0]]
            if layer["op"] in MAP_OPS:
                attrs = layer["attrs"]
                if OPS[layer["op"]][1] == "pixel_bits":
                    self._shapes[layer["output"]] = map_geometry(
                        layer["op"], attrs["shape"], attrs
                    )
            if layer["op"] == "xnor_conv2d":
                self._prepare_xnor_conv(layer)
            if layer["op"] == "dense" and layer["attrs"]["float64"]:
                w = self.tensors[layer["tensors"]["weight"]]
                b = self.tensors[layer["tensors"]["bias"]]
                self._wide_dense[layer["tensors"]["weight"]] = (
                    np.ascontiguousarray(w.T, dtype=np.float64),
                    b.astype(np.float64),
                )
            if layer["op"] in ("bit_dense_step", "bit_conv_step", "bit_conv2d_step"):
                key = layer["tensors"]["weight_t"]
                self._steps[key] = _quantise(self.tensors[key])
            if layer["op"] == "xnor_dense":
                key = layer["tensors"]["weight_bits"]
                words = packed_to_words(self.tensors[key], width)
                self._words[key] = np.ascontiguousarray(words.T)
            widths[layer["output"]] = layer.get("attrs", {}).get("out", width)
        self._widths = widths
        self._has_maps = any(lay["op"] in MAP_OPS for lay in self.graph["layers"])

    def _prepare_xnor_conv(self, layer):
        """Word-major weight words and padding corrections of an XNOR conv."""
        attrs = layer["attrs"]
        c, _, _ = attrs["shape"]
        k, oc = attrs["kernel"], attrs["channels"]
        group = 64 * words_per_pixel(c)
        key = layer["tensors"]["weight_bits"]
        raw = self.tensors[key]
        bits = np.unpackbits(raw, axis=1).reshape(oc, k, k, group)
        if bits[..., c:].any():
            raise _schema_error(
                f"layer {layer['name']!r}: the padding bits of its weights are not 0."
            )
        words = packed_to_words(raw, k * k * group)
        self._words[key] = np.ascontiguousarray(words.T)
        signs = 2 * bits[..., :c].astype(np.int64) - 1
        self._corr[key] = conv_corrections(
            signs, attrs["shape"], k, attrs["stride"], attrs["padding"]
        )

    def _bit_dense_step(self, layer, x, n_threads):
        """Real weights on bits, then the step of the exact sum (see kernels)."""
        width = self._widths[layer["inputs"][0]]
        return self._step_rows(layer, x, width, layer["attrs"]["out"], n_threads)

    def _step_rows(self, layer, x, width, n_out, n_threads, dense=None):
        """``1[bits . w >= threshold]`` for each row of words `x`.

        `dense`, if given, holds the same bits as 0/1 values (one per unit).
        """
        key = layer["tensors"]["weight_t"]
        q, scale, abs_sum, w_rows = self._steps[key]
        thr = self._tensor(layer, "threshold")
        rows = x.shape[0]
        out = np.empty((rows, -(-n_out // 64)), dtype=np.uint64)
        if rows < BLAS_MIN_ROWS:
            if n_threads <= 1:
                step_int16(x, q, scale, thr, w_rows, out, 0, rows, 0, n_out)
            else:  # split the outputs on word boundaries
                n_words = out.shape[1]
                tasks = [
                    (x, q, scale, thr, w_rows, out, 0, rows, 64 * a, min(64 * b, n_out))
                    for a, b in _split(n_words, n_threads)
                ]
                run_in_threads(step_int16, tasks, n_threads)
            return out
        if dense is None:
            dense = np.empty((rows, width), dtype=np.float32)
            _run_rows(unpack_words, rows, n_threads, x, width, dense)
        z = dense.astype(np.float32, copy=False) @ self.tensors[key]
        _run_rows(step_certified, rows, n_threads, z, x, abs_sum, thr, w_rows, out)
        return out

    def _weights_as(self, key, dtype):
        """The array `key` in `dtype` (float64 copies are made once, kept)."""
        arr = self.tensors[key]
        if arr.dtype == dtype:
            return arr
        wide = self._wide.get(key)
        if wide is None:
            wide = self._wide[key] = arr.astype(dtype)
        return wide

    def __getstate__(self):
        return {"graph": self.graph, "tensors": self.tensors}

    def __setstate__(self, state):
        self.__init__(state["graph"], state["tensors"])

    @property
    def layers(self):
        """The layer dicts of the graph, in forward order."""
        return self.graph["layers"]

    def width(self, value):
        """Number of units of the value called `value`."""
        return self._widths[value]

    def forward(self, X, n_threads=1, *, keep=()):
        """Run the net on validated float32 rows.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features_in), dtype float32
            Input rows (C-contiguous).
        n_threads : int, default=1
            Threads the kernels run on.
        keep : collection of str, default=()
            Names of intermediate values to return as well.

        Returns
        -------
        out : ndarray of shape (n_samples, n_outputs_), dtype float32
            The output value of the graph; with `keep`, a dict of the kept
            values and ``"output"``.
        """
        n = X.shape[0]
        if self._has_maps and n > MAP_CHUNK:
            # feature maps: bounded memory, a chunk of samples at a time
            parts = [
                self.forward(X[a:b], n_threads, keep=keep)
                for a, b in _split(n, -(-n // MAP_CHUNK))
            ]
            if not keep:
                return np.concatenate(parts)
            return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        env = {"input": X}
        for layer in self.graph["layers"]:
            env[layer["output"]] = self._run(layer, env, n, n_threads)
        out = env[self.graph["output"]]
        if keep:
            kept = {k: env[k] for k in keep}
            kept["output"] = out
            return kept
        return out

    def _tensor(self, layer, key):
        return self.tensors[layer["tensors"][key]]

    def _run(self, layer, env, n, n_threads):
        op = layer["op"]
        attrs = layer.get("attrs", {})
        xs = [env[s] for s in layer["inputs"]]
        x = xs[0]
        if n_threads > 1:
            # handing a small layer to threads costs more than it saves
            work = x.shape[0] * self._widths[layer["inputs"][0]]
            work *= self._widths[layer["output"]]
            if op == "xnor_dense":
                work //= 16  # a multiply-accumulate is a sixteenth of a word
            if work < PARALLEL_MIN_WORK:
                n_threads = 1
        if op == "dense":
            w, b = self._tensor(layer, "weight"), self._tensor(layer, "bias")
            if attrs["float64"]:
                w64, b64 = self._wide_dense[layer["tensors"]["weight"]]
                out = x.astype(np.float64) @ w64
                out += b64
                return out.astype(np.float32)
            out = x @ w.T
            out += b
            return out
        if op == "batch_norm":
            out = x * self._tensor(layer, "scale")
            out += self._tensor(layer, "shift")
            return out
        if op == "relu":
            return np.maximum(x, np.float32(0))
        if op == "add":
            return xs[0] + xs[1]
        if op == "step":
            width = x.shape[1]
            out = np.empty((x.shape[0], -(-width // 64)), dtype=np.uint64)
            zeros = self._zeros.get(width)
            if zeros is None:
                zeros = self._zeros[width] = np.zeros(width, dtype=np.float32)
            _run_rows(pack_ge, x.shape[0], n_threads, x, zeros, out)
            return out
        if op == "bit_dense_step":
            return self._bit_dense_step(layer, x, n_threads)
        if op in MAP_OPS:
            return self._run_map(layer, xs, n_threads)
        if op == "conv":
            w = self._tensor(layer, "weight")
            patches, (h, w_out) = _patches(x, attrs)
            out = patches @ w.T
            out += self._tensor(layer, "bias")
            return _channels_first(out, n, h, w_out)
        if op == "bit_conv_step":
            width = self._widths[layer["inputs"][0]]
            maps = self.unpack(layer["inputs"][0], x)
            patches, (h, w_out) = _patches(maps, attrs)
            words = _pack_rows(patches)
            bits = self._step_rows(
                layer, words, patches.shape[1], attrs["channels"], n_threads
            )
            rows = np.empty((bits.shape[0], attrs["channels"]), dtype=np.uint8)
            _run_rows(unpack_words, bits.shape[0], n_threads, bits, rows.shape[1], rows)
            return _pack_rows(_channels_first(rows, n, h, w_out))
        if op == "max_pool":
            c, h, w = attrs["shape"]
            maps = self.unpack(layer["inputs"][0], x).reshape(n, c, h, w)
            maps = maps[:, :, : h - h % 2, : w - w % 2]
            pooled = maps.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
            return _pack_rows(pooled.reshape(n, -1))
        if op == "bit_dense":
            key = layer["tensors"]["weight_t"]
            rows = x.shape[0]
            dtype = np.float64 if attrs["float64"] else np.float32
            acc = np.empty((rows, attrs["out"]), dtype=dtype)
            acc[:] = self._tensor(layer, "bias")
            width = self._widths[layer["inputs"][0]]
            for bits in xs:
                if rows < BLAS_MIN_ROWS or _density(bits, width) < SPARSE_DENSITY:
                    wt = self.tensors[key]
                    _run_rows_cols(
                        bit_accumulate, rows, attrs["out"], n_threads, bits, wt, acc
                    )
                else:
                    # many rows: a matrix product of the 0/1 rows (BLAS)
                    dense = np.empty((rows, width), dtype=acc.dtype)
                    _run_rows(unpack_words, rows, n_threads, bits, width, dense)
                    acc += dense @ self._weights_as(key, acc.dtype)
            return acc.astype(np.float32, copy=False)
        if op == "xnor_dense":
            ww = self._words[layer["tensors"]["weight_bits"]]
            n_bits = self._widths[layer["inputs"][0]]
            out = np.empty((x.shape[0], attrs["out"]), dtype=np.float32)
            _run_rows_cols(
                xnor_affine,
                x.shape[0],
                attrs["out"],
                n_threads,
                x,
                ww,
                n_bits,
                self._tensor(layer, "alpha"),
                self._tensor(layer, "beta"),
                out,
            )
            return out
        if op == "if_neuron":
            t = attrs["time_steps"]
            out = np.empty((n * t, -(-x.shape[1] // 64)), dtype=np.uint64)
            _run_rows(
                if_neuron_pack,
                n,
                n_threads,
                x,
                t,
                attrs["constant"],
                x.dtype.type(attrs["threshold"]),
                attrs["reset"] == "zero",
                out,
            )
            return out
        if op == "time_mean":
            t = attrs["time_steps"]
            return x.reshape(n, t, -1).mean(axis=1, dtype=np.float32)
        raise AssertionError(op)  # pragma: no cover - validated on construction

    def _run_map(self, layer, xs, n_threads):
        """One layer on channels-last maps (see :mod:`sksign.deploy._maps`)."""
        op, attrs = layer["op"], layer["attrs"]
        c, h, w = attrs["shape"]
        x = xs[0]
        # the maps of a spiking net hold T rows per sample: n counts rows
        n = x.shape[0]

        def run(kernel, n_rows, *args):
            _run_rows(kernel, n_rows, n_threads, *args)

        if op == "pixel_neuron":
            return fire_maps(x, c, attrs, run)
        if op == "pixel_gate":
            return gate_pixels(xs[0], xs[1], attrs["connect"])
        if op == "to_nhwc":
            maps = x.reshape(n, c, h, w).transpose(0, 2, 3, 1)
            return np.ascontiguousarray(maps).reshape(n, -1)
        if op == "channel_affine":
            out = x.reshape(-1, c) * self._tensor(layer, "scale")
            out += self._tensor(layer, "shift")
            return out.reshape(n, -1)
        if op == "pixel_step":
            return pack_pixels(x, c, run)
        if op == "pixel_unpack":
            return unpack_pixels(x, c, run, np.float32)
        if op == "avg_pool2d":
            k = attrs["kernel"]
            ho, wo = h // k, w // k
            maps = x.reshape(n, h, w, c)[:, : ho * k, : wo * k]
            sums = maps.reshape(n, ho, k, wo, k, c).sum(axis=(2, 4), dtype=np.float64)
            return (sums / (k * k)).astype(np.float32).reshape(n, -1)
        if op == "global_avg_pool":
            sums = x.reshape(n, h * w, c).sum(axis=1, dtype=np.float64)
            return (sums / (h * w)).astype(np.float32)
        if op == "bit_global_avg_pool":
            counts = unpack_pixels(x, c, run).reshape(n, h * w, c).sum(axis=1)
            return counts.astype(np.float32) / np.float32(h * w)
        k, s, p, oc = (
            attrs["kernel"],
            attrs["stride"],
            attrs["padding"],
            attrs["channels"],
        )
        if op == "conv2d":
            patches, (ho, wo) = im2col(x.reshape(n, h, w, c), k, s, p)
            out = patches @ self._tensor(layer, "weight").T
            out += self._tensor(layer, "bias")
            return out.reshape(n, -1)
        if op == "xnor_conv2d":
            key = layer["tensors"]["weight_bits"]
            words = x.reshape(n, h, w, words_per_pixel(c))
            patches, (ho, wo) = im2col(words, k, s, p)
            dots = np.empty((patches.shape[0], oc), dtype=np.int32)
            ones, zeros = np.ones(oc, np.int64), np.zeros(oc, np.int64)
            _run_rows_cols(
                xnor_affine,
                patches.shape[0],
                oc,
                n_threads,
                patches,
                self._words[key],
                k * k * c,
                ones,
                zeros,
                dots,
            )
            dots = dots.reshape(n, ho * wo, oc)
            dots += self._corr[key]
            out = dots.astype(np.float32) * self._tensor(layer, "alpha")
            out += self._tensor(layer, "beta")
            return out.reshape(n, -1)
        # real weights on bits: im2col of the 0/1 maps (as float32 for a
        # BLAS product of many rows)
        few = (
            n * ((h + 2 * p - k) // s + 1) * ((w + 2 * p - k) // s + 1) < BLAS_MIN_ROWS
        )
        blas_only = op == "bit_conv2d" and not few
        dtype = np.float32 if blas_only else np.uint8
        bits = unpack_pixels(x, c, run, dtype).reshape(n, h, w, c)
        patches, _ = im2col(bits, k, s, p)
        rows, width = patches.shape
        if op == "bit_conv2d_step":
            words = _pack_rows(patches)
            out = self._step_rows(layer, words, width, oc, n_threads, dense=patches)
            return out.reshape(n, -1)
        wt = self._tensor(layer, "weight_t")
        if blas_only:
            out = patches @ wt
            out += self._tensor(layer, "bias")
            return out.reshape(n, -1)
        acc = np.empty((rows, oc), dtype=np.float32)
        acc[:] = self._tensor(layer, "bias")
        _run_rows_cols(
            bit_accumulate, rows, oc, n_threads, _pack_rows(patches), wt, acc
        )
        return acc.reshape(n, -1)

    def unpack(self, value, words):
        """0/1 uint8 array of the packed value `value` (for inspection).

        Maps of channel bits come back channels first, flattened as torch's
        ``Flatten`` flattens ``(C, H, W)`` maps.
        """
        if value in self._shapes:  # pixel_bits
            c, h, w = self._shapes[value]
            flat = unpack_pixels(words, c, lambda k, r, *a: k(*a, 0, r))
            return np.ascontiguousarray(
                flat.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(len(flat), -1)
            )
        width = self._widths[value]
        out = np.empty((words.shape[0], width), dtype=np.uint8)
        unpack_words(words, width, out, 0, words.shape[0])
        return out
