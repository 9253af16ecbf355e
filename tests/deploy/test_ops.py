"""The op registry of sksign.deploy: one unit per op, found by discovery."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib
import pkgutil

import numpy as np
import pytest

import sksign.deploy._ops as ops_package
from sksign.deploy import PackedNet
from sksign.deploy._format import KINDS, OpSpec, conv_output_size, schema_error
from sksign.deploy._ops import OPS

_DIMS = {"in", "out", "in_bytes", "c_in", "oc", "patch", "patch_bytes"}


def test_every_public_module_of_the_ops_package_is_one_registered_op():
    """Check the registry holds exactly the public modules, by their names."""
    names = {
        info.name
        for info in pkgutil.iter_modules(ops_package.__path__)
        if not info.name.startswith("_")
    }
    assert set(OPS) == names


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_op_spec_is_complete(op):
    """Check an op's spec: known kinds, typed attributes, tensor shape templates."""
    spec = OPS[op]
    assert isinstance(spec, OpSpec)
    assert spec is importlib.import_module(f"sksign.deploy._ops.{op}").SPEC
    assert spec.reads in KINDS
    assert spec.writes in KINDS
    assert spec.n_inputs in (None, 1, 2)
    assert all(t in (bool, int, float, str, list) for t in spec.attrs.values())
    for dtype, template in spec.tensors.values():
        assert dtype in ("float32", "uint8")
        assert set(template) <= _DIMS
    assert spec.layout in (None, "nchw", "nhwc")
    if spec.layout is not None:  # image layers read and check a shape
        assert spec.attrs.get("shape") is list
        assert callable(spec.geometry)
    if spec.writes == "pixel_bits":
        assert spec.layout == "nhwc"
    assert callable(spec.prepare)
    assert spec.arithmetic  # what packed_summary says the op computes
    assert spec.work_divisor >= 1


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "expected"),
    [(5, 3, 1, 0, 3), (5, 3, 1, 1, 5), (32, 3, 2, 1, 16), (7, 1, 2, 0, 4)],
)
def test_conv_output_size(size, kernel, stride, padding, expected):
    """Check the one conv geometry function against torch's formula."""
    assert conv_output_size(size, kernel, stride, padding) == expected


def _square_prepare(layer, context):
    scale = context.tensor(layer, "scale")

    def run(xs, n, n_threads):
        return xs[0] * xs[0] * scale

    return run


def _check_square(name, attrs, per_sample):
    if attrs["power"] != 2:
        raise schema_error(f"layer {name!r} squares only.")
    return per_sample


def test_an_op_is_its_unit_alone(monkeypatch):
    """Check that registering a spec is all a new op needs to load and run.

    Validation (kinds, attributes, tensors, the op's own check) and the forward
    pass read the registry alone: no other table names the op.
    """
    spec = OpSpec(
        "float",
        "float",
        1,
        {"power": int},
        {"scale": ("float32", ("in",))},
        check=_check_square,
        prepare=_square_prepare,
    )
    monkeypatch.setitem(OPS, "square", spec)
    layer = {
        "name": "sq",
        "op": "square",
        "inputs": ["input"],
        "output": "h",
        "attrs": {"power": 2},
        "tensors": {"scale": "s"},
    }
    graph = {
        "format": "sksign-packed", "version": 1, "estimator": "regressor",
        "n_features_in": 3, "layers": [layer], "output": "h",
    }  # fmt: skip
    tensors = {"s": np.array([1.0, 2.0, 3.0], np.float32)}
    X = np.array([[1.0, 2.0, 3.0]], np.float32)
    np.testing.assert_array_equal(
        PackedNet(graph, tensors).forward(X), [[1.0, 8.0, 27.0]]
    )
    layer["attrs"]["power"] = 3
    with pytest.raises(ValueError, match="squares only"):
        PackedNet(graph, tensors)
    layer["attrs"]["power"] = 2
    with pytest.raises(ValueError, match="must be float32 of shape"):
        PackedNet(graph, {"s": np.ones(2, np.float32)})
