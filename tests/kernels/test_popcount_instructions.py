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


# Compiles (never runs) the popcount kernels for a CPU with AVX-512 VPOPCNTDQ
# and counts instructions in their machine code; prints one line of JSON.
_MACHINE_CODE = """
import json, re
from numba import types
from sksign.deploy._kernels._madd import pair_sums
from sksign.deploy._kernels._sums import sum_conv
from sksign.deploy._kernels._xnor import xnor_affine, xnor_affine_vectors, xnor_kernel
from sksign.kernels import popcount_instructions
from sksign.kernels._nibbles import nibble_kernels
from sksign.kernels._popcount import knn_counts, pairwise_counts
from sksign.kernels._vector_search import knn_counts_vectors, pairwise_counts_vectors
from sksign.kernels._words import hamming_kernels

u64, i64, f32, i32 = (types.Array(t, d, "C") for t, d in (
    (types.uint64, 2), (types.int64, 2), (types.float32, 1), (types.int32, 2)))
f32_2 = types.Array(types.float32, 2, "C")
u64_3 = types.Array(types.uint64, 3, "C")
n = types.int64
kernels = {
    "xnor_affine": (xnor_affine, (u64, u64, n, f32, f32, f32_2, n, n, n, n)),
    "knn_counts": (knn_counts, (u64, u64, i64, i64)),
    "pairwise_counts": (pairwise_counts, (u64, u64, i32)),
    "xnor_affine_vectors": (  # the weights in blocks of 32 columns
        xnor_affine_vectors, (u64, u64_3, n, f32, f32, f32_2, n, n, n, n)),
    "knn_counts_vectors": (knn_counts_vectors, (u64, u64, i64, i64)),
    "pairwise_counts_vectors": (pairwise_counts_vectors, (u64, u64, i32)),
}
found = {"path": popcount_instructions(), "nibbles": nibble_kernels(),
         "chosen": [xnor_kernel().__name__, hamming_kernels()[1].__name__]}
for name, (kernel, sig) in kernels.items():
    kernel.compile(sig)
    asm = kernel.inspect_asm(sig)
    found[name] = {i: len(re.findall(r"\\b" + i + r"\\b", asm))
                   for i in ("vpopcntq", "vpshufb")}
    found[name]["zmm"] = len(re.findall(r"\\bvpopcntq\\s[^\\n]*%zmm", asm))
# the real-weights kernels: table rows added in 512-bit vectors, int16
# products by 512-bit vpmaddwd
u64_1, i64_1, f32_4 = (types.Array(t, d, "C") for t, d in (
    (types.uint64, 1), (types.int64, 1), (types.float32, 4)))
wide = {
    "sum_conv": (sum_conv, (u64_1, f32_4, i64_1, u64_1, f32_2, types.boolean,
                            i64_1, f32, f32, f32, f32_2, f32_2, n, n), "vaddps"),
    # vpmaddwd, or the vpdpwssd LLVM fuses it into with its add (VNNI)
    "pair_sums": (pair_sums, (i32, i32, i32, n, n), "(?:vpmaddwd|vpdpwssd)"),
}
for name, (kernel, sig, op) in wide.items():
    kernel.compile(sig)
    asm = kernel.inspect_asm(sig)
    found[name] = len(re.findall(r"\\b" + op + r"\\s[^\\n]*%zmm", asm))
print(json.dumps(found))
"""

AVX512_VPOPCNTDQ = (
    "+64bit,+avx,+avx2,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512vl,"
    "+avx512vpopcntdq,+bmi,+bmi2,+cx16,+f16c,+fma,+lzcnt,+movbe,+popcnt,"
    "+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave"
)


def test_the_kernels_compile_to_the_vector_popcount_where_the_cpu_has_it(tmp_path):
    """Check the machine code for an AVX-512 VPOPCNTDQ CPU (an Ice Lake
    server), compiled here but never run: the sign x sign layer, the k-NN
    search and the distance matrix use ``vpopcntq``, none the AVX2 nibble
    look-ups, the register-block kernels count whole 512-bit registers and
    are the ones chosen there, the nibble kernels not; the table sums of
    the real-weights convolutions add 512-bit vectors and the int16
    products use 512-bit ``vpmaddwd`` (or ``vpdpwssd``)."""
    import json
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        NUMBA_CPU_NAME="icelake-server",
        NUMBA_CPU_FEATURES=AVX512_VPOPCNTDQ,
        NUMBA_CACHE_DIR=str(tmp_path),  # never the host's compiled kernels
    )
    run = subprocess.run(
        [sys.executable, "-c", _MACHINE_CODE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["path"].startswith("AVX-512 VPOPCNTDQ")
    assert found["nibbles"] is False
    for name in ("xnor_affine", "knn_counts", "pairwise_counts"):
        assert found[name]["vpopcntq"] > 0, name
        assert found[name]["vpshufb"] == 0, name
    for name in (
        "xnor_affine_vectors",
        "knn_counts_vectors",
        "pairwise_counts_vectors",
    ):
        assert found[name]["zmm"] >= 16, name  # a block of 4 x 4 vectors
        assert found[name]["vpshufb"] == 0, name
    assert found["chosen"] == ["xnor_affine_vectors", "knn_counts_vectors"]
    # the real-weights kernels add and multiply in 512-bit vectors there
    assert found["sum_conv"] >= 8  # a block of 8 rows of one vector
    assert found["pair_sums"] >= 5  # a tile of 5 rows
