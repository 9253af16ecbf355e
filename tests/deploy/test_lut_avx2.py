"""The ``vpshufb`` look-up kernel (AVX2), on any machine with AVX2.

Where the CPU has AVX-512 VBMI and VNNI the look-up tests run the ``vpermb``
kernel; this runs the same tests (:mod:`tests.deploy.test_lut_kernels` and
:mod:`tests.deploy.test_lut_chain`) with numba compiling for an AVX2 CPU
without AVX-512 (a Haswell), where the sums are ``vpshufb`` look-ups: the
same exact int32 sums, steps and chains, bit for bit.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

AVX2 = (
    "+64bit,+avx,+avx2,+bmi,+bmi2,+cx16,+f16c,+fma,+lzcnt,+movbe,+popcnt,"
    "+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave"
)
HERE = Path(__file__).parent


def _host_runs_avx2():
    import llvmlite.binding as llvm

    host = llvm.get_host_cpu_features()
    return all(host.get(f[1:], False) for f in AVX2.split(",") if f != "+64bit")


@pytest.mark.skipif(not _host_runs_avx2(), reason="the host cannot run AVX2 code")
def test_the_look_up_tests_pass_with_the_avx2_kernel():
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=AVX2)
    kind = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sksign.deploy._kernels._lut import LUT_KIND; print(LUT_KIND)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert kind.stdout.split()[-1] == "avx2"
    files = [str(HERE / "test_lut_kernels.py"), str(HERE / "test_lut_chain.py")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed", summary), summary
    assert "skipped" not in summary, summary  # none for want of the kernel
