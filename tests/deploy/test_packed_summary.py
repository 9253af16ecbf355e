"""packed_summary: bytes per layer and the measured speed-up."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math

import pytest

from sksign.deploy import pack, packed_summary
from sksign.estimators import HTAFNetClassifier


@pytest.fixture(scope="module")
def bnn(digits):
    X_train, _, y_train, _ = digits
    net = HTAFNetClassifier((70, 130), architecture="bnn", max_epochs=1, random_state=0)
    return net.fit(X_train, y_train)


def test_bytes_per_layer(bnn):
    """Check packed and float32 bytes of each kind of layer."""
    rows, table = packed_summary(pack(bnn))
    by_name = {r["layer"]: r for r in rows}
    fc1 = by_name["fc1"]  # 70 -> 130 binary weights
    assert fc1["op"] == "xnor_dense"
    assert fc1["weight_bytes_packed"] == 130 * math.ceil(70 / 8) + 2 * 4 * 130
    assert fc1["weight_bytes_float32"] == 4 * (70 * 130 + 2 * 130)
    assert by_name["act1"]["act_bytes_packed"] == math.ceil(70 / 8)
    assert by_name["act1"]["act_bytes_float32"] == 4 * 70
    stem = by_name["stem"]
    assert stem["weight_bytes_packed"] == stem["weight_bytes_float32"]
    total = rows[-1]
    assert total["layer"] == "total"
    assert total["weight_bytes_packed"] == sum(
        r["weight_bytes_packed"] for r in rows[:-1]
    )
    assert "smaller" in table
    assert "seconds_packed" not in total


def test_timing_against_a_reference(bnn, digits):
    """Check that X and a reference give times and a speed-up."""
    _, X_test, _, _ = digits
    rows, table = packed_summary(pack(bnn), X_test, reference=bnn, n_repeats=2)
    total = rows[-1]
    assert total["seconds_packed"] > 0
    assert total["speedup"] == pytest.approx(
        total["seconds_reference"] / total["seconds_packed"]
    )
    assert "faster" in table.splitlines()[-1]
    rows, _ = packed_summary(pack(bnn).net_, X_test, n_repeats=1)
    assert rows[-1]["seconds_packed"] > 0


def test_summary_rejects_other_objects(bnn):
    """Check a clear TypeError for a torch net."""
    with pytest.raises(TypeError, match="packed_summary takes"):
        packed_summary(bnn)
