"""benchmarks/_machine.py: the popcount peak the speed tables rate kernels against."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _machine  # benchmarks/_machine.py


def test_block_loop_counts_the_xor_popcounts():
    """Check the register-block loop of the peak counts what it claims:
    popcount(x[r, w] ^ wt[w, c]) summed over the words, once per repeat."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**63, (4, 64), dtype=np.uint64)
    wt = rng.integers(0, 2**63, (64, 32), dtype=np.uint64)
    counts = np.zeros((4, 32), np.int64)
    total = _machine._block_loop(x, wt, counts, 3)
    xor = x[:, :, None] ^ wt[None, :, :]
    ref = np.unpackbits(xor.view(np.uint8), axis=-1).reshape(4, 64, 32, 64).sum((1, 3))
    np.testing.assert_array_equal(counts, ref)
    assert total == 3 * ref[0, 0]


def test_popcount_peak_is_a_rate():
    """Check the peak is a positive, finite rate of bit comparisons."""
    peak = _machine.popcount_peak(repeats=512)
    assert np.isfinite(peak)
    assert peak > 1e6


def test_popcount_peak_of_two_threads_is_a_rate_per_thread():
    """Check the peak with two threads busy at once is a positive, finite
    rate per thread."""
    peak = _machine.popcount_peak(repeats=512, threads=2)
    assert np.isfinite(peak)
    assert peak > 1e6


def test_handoff_is_the_extra_time_of_a_two_thread_call(monkeypatch):
    """Check the hand-off is the two-thread median less half the one-thread
    median (one of its two tasks; the smaller of two runs of each), each call
    run once per timing."""
    calls, per_call, now = [], {1: 1e-6, 2: 5e-5}, [0.0]

    def timed_run(func, tasks, n):  # a fake clock: a call takes per_call[n]
        calls.append(n)
        for t in tasks:
            func(*t)
        now[0] += per_call[n]

    def python_for(seconds):
        now[0] += seconds

    monkeypatch.setattr(_machine, "run_in_threads", timed_run)
    monkeypatch.setattr(_machine.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(_machine, "_python_for", python_for)
    monkeypatch.setattr(_machine, "_busy_iterations", lambda seconds: 1)
    seconds = _machine.handoff_seconds(calls=7)
    assert np.isclose(seconds, per_call[2] - per_call[1] / 2)
    assert calls.count(1) == calls.count(2) == 2 * (7 + 1)


def test_handoff_is_measured_on_this_machine():
    """Check the real measurement is a small, finite time."""
    seconds = _machine.handoff_seconds(calls=20)
    assert np.isfinite(seconds)
    assert -1e-3 < seconds < 0.1


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mapped_bytes():
    """Bytes glibc holds in blocks mapped on their own (``mallinfo2().hblkhd``)."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        pytest.skip("needs glibc 2.33 or later (mallinfo2)")
    mallinfo2.restype = _MallInfo2
    return mallinfo2().hblkhd


def test_steady_allocator_takes_large_blocks_from_the_heap():
    """Check that after steady_allocator a block of 8 MiB (a batch's maps)
    is not mapped on its own, as glibc's default 128 KiB threshold maps it."""
    before = _mapped_bytes()
    if not _machine.steady_allocator():
        pytest.skip("not glibc")
    block = np.ones(8 * 2**20, np.uint8)
    assert _mapped_bytes() - before < block.nbytes
    assert _machine.steady_allocator()  # again: the same settings, accepted
