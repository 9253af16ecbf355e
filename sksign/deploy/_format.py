"""The packed file's contract: its header, the op specs and graph validation.

A packed net is a list of layers, each an operation (``op``) that reads named
values and writes one. Values are either float rows (``float``: float32
arrays of shape ``(n_rows, width)``), packed bits (``bits``: uint64 words of
shape ``(n_rows, ceil(width / 64))``, in the unit layout of
:mod:`sksign.deploy._kernels`) or channels-last maps of packed bits
(``pixel_bits``: the ``C`` bits of each pixel in ``ceil(C / 64)`` words, see
:mod:`sksign.deploy._maps`). Spiking layers fold time into the rows (row
``n * T + t``).

Each op declares an :class:`OpSpec` (in its own unit of
:mod:`sksign.deploy._ops`); :func:`validate_graph` checks a layer graph and
its tensors against those specs. The converters write graphs that pass it,
``save`` and ``load`` refuse those that do not. Numpy only: no torch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

__all__ = [
    "FORMAT",
    "KINDS",
    "VERSION",
    "OpSpec",
    "check_header",
    "conv_geometry",
    "conv_output_size",
    "schema_error",
    "validate_graph",
]

#: Name and version of the file format (checked on load).
FORMAT = "sksign-packed"
VERSION = 1
#: The kinds of values a layer reads and writes.
KINDS = ("float", "bits", "pixel_bits")
#: Tensors of a regressor's target scaling, named by no layer.
TARGET_TENSORS = ("target_mean", "target_scale")


class OpSpec(NamedTuple):
    """What an op reads, writes and requires: its contract with the file.

    The first five fields are what a layer of this op must declare; the
    others say how to check its geometry and values, and how the runtime
    runs it.

    Attributes
    ----------
    reads, writes : str
        Kind of the inputs and of the output (one of :data:`KINDS`).
    n_inputs : int or None
        Number of inputs (None: one or more).
    attrs : dict of str to type
        Required attributes with their types (``bool``, ``int``, ``float``,
        ``str``, ``list``).
    tensors : dict of str to (str, tuple of str)
        Tensors by role: dtype and shape template. Templates use ``"in"``
        (input width), ``"out"`` (output width), ``"in_bytes"``
        (``ceil(in / 8)``) and, for image layers, ``"c_in"``, ``"oc"``
        (output channels), ``"patch"`` (``C * k * k``) and ``"patch_bytes"``
        (``k * k * 8 * ceil(C / 64)``).
    layout : {None, "nchw", "nhwc"}
        Image layers: ``"nchw"`` for channels-first maps (as torch's
        ``Flatten`` flattens them), ``"nhwc"`` for the channels-last maps of
        :mod:`sksign.deploy._maps`. Both need the attribute ``shape``, the
        input's ``(C, H, W)``.
    geometry : callable or None
        ``geometry(shape, attrs) -> (C, H, W)`` of the output of an image
        layer; raises ValueError for sizes that give no output.
    check : callable or None
        ``check(name, attrs, rows_per_sample) -> rows_per_sample``: checks
        the attribute values (raising :func:`schema_error`) and returns the
        rows per sample of the output.
    keeps_shape : bool
        The output has the map shape of its inputs (when they agree).
    work_divisor : int
        How many multiply-accumulates one unit of work is worth (the runtime
        hands layers of ``rows * in * out / work_divisor`` work to threads).
    arithmetic : str
        What the op computes, in a few words (:func:`~sksign.deploy.packed_summary`).
    n_weights : callable or None
        ``n_weights(layer, n_in, n_out)``: its weights as float32 would store
        them, one per weight (default: the size of its 2-D tensors).
    prepare : callable or None
        ``prepare(layer, context) -> run``, set by the op's unit: derives what
        the layer needs once, at load, and returns
        ``run(inputs, n_samples, n_threads) -> output``.
    epilogues : tuple of tuple of str
        The runs of ops that can follow this op and run in its pass (see
        :mod:`sksign.deploy._fusion`): then ``prepare(layer, context,
        epilogue)`` gets those layers too, and the run's inputs are the
        layer's own followed by the other inputs of each layer taken over.
    """

    reads: str
    writes: str
    n_inputs: int | None
    attrs: dict
    tensors: dict
    layout: str | None = None
    geometry: Callable | None = None
    check: Callable | None = None
    keeps_shape: bool = False
    work_divisor: int = 1
    arithmetic: str = ""
    n_weights: Callable | None = None
    prepare: Callable | None = None
    epilogues: tuple = ()


def schema_error(message):
    """The ValueError of an invalid packed model."""
    return ValueError(f"Not a valid packed model: {message}")


def conv_output_size(size, kernel, stride=1, padding=0):
    """Output size of a convolution (or pooling window) along one axis."""
    return (size + 2 * padding - kernel) // stride + 1


#: The attributes of a square convolution (what :func:`conv_geometry` reads;
#: ``stride`` is 1 where absent). Read-only: several op specs share it.
CONV_ATTRS = MappingProxyType(
    {"shape": list, "channels": int, "kernel": int, "padding": int, "out": int}
)


def conv_geometry(shape, attrs):
    """Output ``(C, H, W)`` of a square convolution (``stride`` defaults to 1).

    Raises a ValueError for sizes that give no output (the caller adds the
    layer's name).
    """
    _, h, w = shape
    k, p, oc = attrs["kernel"], attrs["padding"], attrs["channels"]
    s = attrs.get("stride", 1)
    if k < 1 or s < 1 or oc < 1 or p < 0:
        raise ValueError("invalid kernel, stride, padding or channels")
    if h + 2 * p < k or w + 2 * p < k:
        raise ValueError("the kernel is larger than the padded input")
    return oc, conv_output_size(h, k, s, p), conv_output_size(w, k, s, p)


def words_per_pixel(channels):
    """uint64 words that hold the bits of `channels` channels."""
    return -(-channels // 64)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_attr(layer, key, kind):
    attrs = layer.get("attrs", {})
    if key not in attrs:
        raise schema_error(f"layer {layer.get('name')!r} lacks attribute {key!r}.")
    value = attrs[key]
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is int:
        ok = _is_int(value)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise schema_error(
            f"attribute {key!r} of layer {layer.get('name')!r} must be "
            f"{kind.__name__}; got {value!r}."
        )
    return value


def _check_image_layer(name, spec, attrs, width, out_width, known):
    """Dims of an image layer and its output ``(C, H, W)``; raise if they do not add up.

    `known` is the ``(C, H, W)`` of the input when an earlier channels-last
    map layer wrote it (the layer must then read it with that shape), else
    None.
    """
    shape = attrs["shape"]
    if (
        len(shape) != 3
        or not all(_is_int(v) for v in shape)
        or min(shape) < 1
        or shape[0] * shape[1] * shape[2] != width
    ):
        raise schema_error(
            f"layer {name!r}: shape {shape!r} does not describe its {width} inputs."
        )
    if known is not None and tuple(shape) != tuple(known):
        raise schema_error(
            f"layer {name!r} reads maps of shape {list(known)} as {shape!r}."
        )
    try:
        c_out, h, w = spec.geometry(shape, attrs)
    except ValueError as exc:
        raise schema_error(f"layer {name!r}: {exc}.") from None
    if c_out * h * w != out_width:
        raise schema_error(
            f"layer {name!r}: {out_width} outputs do not match its geometry."
        )
    c = shape[0]
    k = attrs.get("kernel", 1)
    dims = {
        "c_in": c,
        "oc": c_out,
        "patch": k * k * c,
        "patch_bytes": k * k * 8 * words_per_pixel(c),
    }
    return dims, (c_out, h, w)


def check_header(graph, estimators=("classifier", "regressor")):
    """Check the header's format, version and estimator kind."""
    if not isinstance(graph, dict):
        raise schema_error("the header must be a JSON object.")
    if graph.get("format") != FORMAT:
        raise schema_error(
            f"format {graph.get('format')!r} is not {FORMAT!r} (a file "
            "written by sksign.deploy.save)."
        )
    if graph.get("version") != VERSION:
        raise schema_error(
            f"version {graph.get('version')!r} is not supported (expected {VERSION})."
        )
    if graph.get("estimator") not in estimators:
        raise schema_error("'estimator' must be 'classifier' or 'regressor'.")


def _check_inputs(layer, name, op, spec, values):
    inputs = layer.get("inputs")
    if (
        not isinstance(inputs, list)
        or not inputs
        or not all(isinstance(s, str) for s in inputs)
    ):
        raise schema_error(f"layer {name!r} must list its inputs by name.")
    if not isinstance(layer.get("attrs", {}), dict):
        raise schema_error(f"layer {name!r}: 'attrs' must be a JSON object.")
    if spec.n_inputs is not None and len(inputs) != spec.n_inputs:
        raise schema_error(
            f"layer {name!r} ({op}) takes {spec.n_inputs} input(s); got {len(inputs)}."
        )
    for src in inputs:
        if src not in values:
            raise schema_error(
                f"layer {name!r} reads {src!r}, which no earlier layer writes."
            )
    kinds = {values[s][0] for s in inputs}
    widths = {values[s][1] for s in inputs}
    rows = {values[s][2] for s in inputs}
    if kinds != {spec.reads} or len(widths) != 1 or len(rows) != 1:
        raise schema_error(
            f"layer {name!r} ({op}) needs {spec.reads} inputs of one width; got "
            f"{[values[s][:2] for s in inputs]}."
        )
    return inputs, widths.pop(), rows.pop()


def _check_tensors(layer, name, op, spec, tensors, dims):
    """Check the layer's tensors against its spec; return their names."""
    names = layer.get("tensors", {})
    if (
        not isinstance(names, dict)
        or set(names) != set(spec.tensors)
        or not all(isinstance(v, str) for v in names.values())
    ):
        raise schema_error(
            f"layer {name!r} ({op}) must name the tensors {sorted(spec.tensors)}; "
            f"got {sorted(names) if isinstance(names, dict) else names!r}."
        )
    for key, (dtype, template) in spec.tensors.items():
        t = tensors.get(names[key])
        if t is None:
            raise schema_error(f"tensor {names[key]!r} of layer {name!r} is missing.")
        shape = tuple(dims[d] for d in template)
        if t.dtype != np.dtype(dtype) or t.shape != shape:
            raise schema_error(
                f"tensor {names[key]!r} of layer {name!r} must be {dtype} of "
                f"shape {shape}; got {t.dtype} of shape {t.shape}."
            )
    return set(names.values())


def validate_graph(graph, tensors, ops):
    """Check a layer graph against its tensors and the op specs `ops`.

    Every layer's op must be one of `ops` (op name to :class:`OpSpec`), its
    inputs defined before it and of the kind the op reads, its attributes
    present with the right types and values, and its tensors present with the
    dtype and shape the widths imply. Raises a ValueError naming the first
    problem.

    Returns
    -------
    values : dict
        Every value's ``(kind, width, rows per sample)``, by name.
    shapes : dict
        The ``(C, H, W)`` of the values that channels-last map layers wrote.
    """
    n_features = graph.get("n_features_in")
    if not _is_int(n_features):
        raise schema_error("'n_features_in' must be an integer.")
    if n_features < 1:
        raise schema_error(f"'n_features_in' must be >= 1; got {n_features}.")
    layers = graph.get("layers")
    if not isinstance(layers, list) or not layers:
        raise schema_error("'layers' must be a non-empty list.")
    # name -> (kind, width, rows per sample)
    values = {"input": ("float", n_features, 1)}
    shapes = {}  # (C, H, W) of the maps that channels-last map layers wrote
    used = set()
    for layer in layers:
        if not isinstance(layer, dict):
            raise schema_error("every layer must be a JSON object.")
        name, op = layer.get("name"), layer.get("op")
        if not isinstance(op, str) or op not in ops:
            raise schema_error(
                f"layer {name!r} has unknown op {op!r}; known ops: {sorted(ops)}."
            )
        spec = ops[op]
        inputs, width, per_sample = _check_inputs(layer, name, op, spec, values)
        for key, kind in spec.attrs.items():
            _check_attr(layer, key, kind)
        a = layer.get("attrs", {})
        out_width = a.get("out", width)
        if out_width < 1:
            raise schema_error(f"layer {name!r} has an output width < 1.")
        dims = {"in": width, "out": out_width, "in_bytes": -(-width // 8)}
        out_shape = None
        known = {shapes.get(s) for s in inputs}
        if spec.layout is not None:
            if spec.layout == "nhwc" and len(known - {None}) > 1:
                raise schema_error(
                    f"layer {name!r} reads maps of different shapes "
                    f"{sorted(known - {None})}."
                )
            extra, out_shape = _check_image_layer(
                name,
                spec,
                a,
                width,
                out_width,
                known.pop() if spec.layout == "nhwc" and len(known) == 1 else None,
            )
            dims.update(extra)
            if spec.layout != "nhwc":
                out_shape = None
        elif spec.keeps_shape and len(known) == 1:
            out_shape = shapes.get(inputs[0])
        used |= _check_tensors(layer, name, op, spec, tensors, dims)
        if spec.check is not None:
            per_sample = spec.check(name, a, per_sample)
        output = layer.get("output")
        if not isinstance(output, str) or output in values:
            raise schema_error(f"layer {name!r} must write a new value name.")
        values[output] = (spec.writes, out_width, per_sample)
        if out_shape is not None:
            shapes[output] = tuple(out_shape)
    out = graph.get("output")
    if (
        not isinstance(out, str)
        or out not in values
        or values[out][0] != "float"
        or values[out][2] != 1
    ):
        raise schema_error("'output' must name a float value with one row per sample.")
    extra = set(tensors) - used - set(TARGET_TENSORS)
    if extra:
        raise schema_error(f"unexpected tensors {sorted(extra)}.")
    return values, shapes
