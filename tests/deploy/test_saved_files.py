"""Files saved by an earlier sksign load and predict the same (format version 1)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from pathlib import Path

import numpy as np
import pytest

from sksign.deploy import load

DATA = Path(__file__).parent / "data" / "format_v1"
FILES = sorted(p.stem for p in DATA.glob("*.sksign"))
#: The ops of format version 1: files written with them must keep loading.
V1_OPS = {
    "add", "avg_pool2d", "batch_norm", "bit_conv2d", "bit_conv2d_step",
    "bit_conv_step", "bit_dense", "bit_dense_step", "bit_global_avg_pool",
    "channel_affine", "conv", "conv2d", "dense", "global_avg_pool", "if_neuron",
    "max_pool", "pixel_gate", "pixel_neuron", "pixel_step", "pixel_unpack",
    "relu", "step", "time_mean", "to_nhwc", "xnor_conv2d", "xnor_dense",
}  # fmt: skip


@pytest.fixture(scope="module")
def expected():
    with np.load(DATA / "expected.npz") as data:
        return dict(data)


def test_the_saved_files_use_every_op_of_version_1():
    """Check the stored files cover every op of format version 1."""
    ops = {
        layer["op"]
        for name in FILES
        for layer in load(DATA / f"{name}.sksign").net_.layers
    }
    assert ops == V1_OPS


@pytest.mark.parametrize("name", FILES)
def test_a_file_of_version_1_loads_and_predicts_the_same(expected, name):
    """Check a stored file loads and gives the outputs of the code that wrote it.

    The same float32 arithmetic on the same rows: equal up to the order of a
    BLAS library's sums (exactly equal where it sums as the writer's did).
    """
    packed = load(DATA / f"{name}.sksign")
    X = expected[f"{name}.X"]
    if f"{name}.out" not in expected:  # a regressor: predict is the output
        np.testing.assert_allclose(
            packed.predict(X), expected[f"{name}.predict"], rtol=1e-5, atol=1e-5
        )
        return
    np.testing.assert_allclose(
        packed.decision_function(X), expected[f"{name}.out"], rtol=1e-5, atol=1e-5
    )
    np.testing.assert_array_equal(packed.predict(X), expected[f"{name}.predict"])
