"""popcount_instructions names what the popcount kernels compile to."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import llvmlite.binding as llvm
import pytest
from numba.core import config

from sksign.kernels import popcount_instructions


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        ("+avx512f,+avx512vpopcntdq,+avx2,+popcnt", "AVX-512 VPOPCNTDQ"),
        ("+avx512f,-avx512vpopcntdq,+avx2,+popcnt", "AVX2"),
        ("-avx2,+popcnt", "POPCNT"),
        ("-avx2,-popcnt", "no popcount instruction"),
    ],
)
def test_an_explicit_numba_target_decides(monkeypatch, features, expected):
    monkeypatch.setattr(config, "CPU_FEATURES", features)
    assert popcount_instructions().startswith(expected)


def test_a_generic_numba_target_has_no_extension(monkeypatch):
    monkeypatch.setattr(config, "CPU_FEATURES", None)
    monkeypatch.setattr(config, "CPU_NAME", "generic")
    assert popcount_instructions().startswith("no popcount instruction")


def test_the_host_cpu_by_default(monkeypatch):
    monkeypatch.setattr(config, "CPU_FEATURES", None)
    monkeypatch.setattr(config, "CPU_NAME", None)
    host = dict(llvm.get_host_cpu_features())
    path = popcount_instructions()
    assert path.startswith("AVX-512") == bool(host.get("avx512vpopcntdq"))
    if not host.get("avx512vpopcntdq"):
        assert path.startswith("AVX2") == bool(host.get("avx2"))
