"""What the benchmark tables print about the machine: its vector features and
its popcount rate, measured in the same run as the kernels they rate."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import ctypes
import platform
import threading
import time
from pathlib import Path

import numpy as np
from _timing import best_of  # benchmarks/_timing.py, beside this script
from numba import njit

from sksign._threads import run_in_threads
from sksign.kernels import popcount64, popcount_instructions
from sksign.kernels._vector_counts import xor_count_block

#: The flags printed with every speed table (and any AVX-512 flag).
VECTOR_FLAGS = ("sse4_2", "popcnt", "avx", "avx2", "fma", "bmi2")


def cpu_features():
    """The CPU's model name and its SIMD flags from /proc/cpuinfo (Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), []
    first = text.split("\n\n", 1)[0]  # the first processor's block
    info = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = info.get("flags", "").split()
    vector = [f for f in flags if f in VECTOR_FLAGS or f.startswith("avx512")]
    return info.get("model name", platform.machine()), vector


def instruction_set(flags):
    """ "AVX-512 + VPOPCNTDQ", "AVX-512", "AVX2" or "baseline": what the
    targets of a table are stated for."""
    if "avx512_vpopcntdq" in flags:
        return "AVX-512 + VPOPCNTDQ"
    if any(f.startswith("avx512") for f in flags):
        return "AVX-512"
    return "AVX2" if "avx2" in flags else "baseline"


@njit(cache=True, nogil=True)
def _popcount_loop(a, b, repeats):
    s = 0
    for _ in range(repeats):
        for w in range(a.shape[0]):
            s += popcount64(a[w] ^ b[w])
    return s


@njit(cache=True, nogil=True)
def _block_loop(x, wt, counts, repeats):
    s = 0
    for _ in range(repeats):
        xor_count_block(counts, 0, 0, x, 0, wt, 0, 4, 4, None)
        s += counts[0, 0]
    return s


def popcount_peak(repeats=20000, threads=1):
    """Bit comparisons per second and thread of XOR + popcount on L1-resident
    words, with `threads` threads running the loops at once: the faster of
    two loops, so that no kernel rates above it.

    - two streams of words, XOR and popcount summed (what numba makes of the
      kernels' own ``popcount64`` here: the vector popcount where the CPU
      has one, else AVX2's nibble look-ups); bound by its loads;
    - :func:`~sksign.kernels._vector_counts.xor_count_block`: four words
      broadcast against four vectors, the 16 counts in registers (on AVX-512
      VPOPCNTDQ about twice the first: one XOR, one ``vpopcntq`` and one add
      per eight comparisons, nothing else).

    With two threads, the rate of each is what a core gives while the other
    core works too: on machines whose cores share their vector units or a
    power budget (virtual CPUs of one physical core, AVX-512 clocks), below
    the one-thread rate. A kernel on `threads` threads is rated against it.
    """
    if threads > 1:
        # runs of about 15 ms, so that starting the threads (about 0.1 ms
        # each here) does not count against the loops
        repeats *= 25
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 2**63, 512, dtype=np.uint64) for _ in range(2))
    x = rng.integers(0, 2**63, (4, 64), dtype=np.uint64)
    wt = rng.integers(0, 2**63, (64, 32), dtype=np.uint64)
    counts = [np.zeros((4, 32), np.int64) for _ in range(threads)]
    _popcount_loop(a, b, 10)
    _block_loop(x, wt, counts[0], 10)
    blocks = repeats * 512 // (4 * 32 * 64)
    loops = [
        lambda c: _popcount_loop(a, b, repeats),
        lambda c: _block_loop(x, wt, c, blocks),
    ]

    def together(loop):
        """`loop` on `threads` threads at once (the loops release the GIL)."""
        if threads == 1:
            return loop(counts[0])
        workers = [threading.Thread(target=loop, args=(c,)) for c in counts[1:]]
        for w in workers:
            w.start()
        loop(counts[0])
        for w in workers:
            w.join()
        return None

    runs = [lambda loop=loop: together(loop) for loop in loops]
    times = best_of(runs, 3, min_seconds=0.05)
    return 64 * 512 * repeats / min(t for t, _ in times)


@njit(cache=True, nogil=True)
def _busy(out, i, n):
    """`n` dependent multiply-adds: a task of a known time."""
    x = 1.0
    for _ in range(n):
        x = x * 0.999999 + 1e-6
    out[i] = x


def _busy_iterations(seconds):
    """Iterations of :func:`_busy` that take about `seconds` (best of 5)."""
    out = np.zeros(1)
    _busy(out, 0, 1)
    n, best = 100_000, np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        _busy(out, 0, n)
        best = min(best, time.perf_counter() - t0)
    return max(1, int(n * seconds / best))


def _python_for(seconds):
    """Run Python (holding the GIL) for about `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def handoff_seconds(calls=400, task_seconds=2e-4):
    """Median time a call of two tasks of `task_seconds` each takes on two
    threads beyond one task's time: waking a pool thread and waiting for it
    (:func:`sksign._threads.run_in_threads`), up to `task_seconds` (a helper
    later than that finds no task left, and the call does not wait for it).

    Half of the one-thread median is one task's time; the caller runs Python
    between the calls, as a forward does between its layers. A layer split
    over two threads saves time only where half its work takes longer than
    this (and than reading its weights into the second core's cache).
    """
    n = _busy_iterations(task_seconds)
    out = np.zeros(2)
    tasks = [(out, 0, n), (out, 1, n)]
    times = {}
    for n_threads in (1, 2, 1, 2):
        run_in_threads(_busy, tasks, n_threads)  # pool made, both paths warm
        ts = []
        for _ in range(calls):
            t0 = time.perf_counter()
            run_in_threads(_busy, tasks, n_threads)
            ts.append(time.perf_counter() - t0)
            _python_for(5e-5)  # the caller busy in Python, as between layers
        times[n_threads] = min(times.get(n_threads, np.inf), float(np.median(ts)))
    return times[2] - times[1] / 2


#: ``mallopt`` parameters of glibc (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Blocks up to this size come from the heap: the largest mmap threshold
#: glibc takes on 64-bit systems.
MMAP_THRESHOLD = 32 * 2**20
#: Free memory at the top of the heap kept for the next allocations.
TRIM_THRESHOLD = 2**30


def steady_allocator():
    """Fix glibc's malloc thresholds for the rest of the process; whether it could.

    glibc maps each block above its mmap threshold afresh (and faults its
    pages in at every call) and raises that threshold as large blocks are
    freed, so a model's time depended on what had run before it in the same
    process: torch's step ResNet-18 at batch 64 took 85-88 ms in a fresh
    process and 62-64 ms after one other benchmark had run (AMD EPYC, one
    thread). With blocks up to :data:`MMAP_THRESHOLD` from the heap and its
    top kept, every call of either side runs as a warm one. Not glibc (no
    ``mallopt``): nothing is changed and False is returned.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def print_machine(threads=(1, 2)):
    """Fix the allocator (:func:`steady_allocator`), then print the CPU, its
    vector features and the measured popcount peak per thread with each
    number of `threads` busy; return those peaks (bit comparisons per second
    and thread), by number of threads."""
    model, flags = cpu_features()
    steady = steady_allocator()
    peaks = {n: popcount_peak(threads=n) for n in threads}
    print(f"# {model}; {', '.join(flags)} ({instruction_set(flags)})")
    if steady:
        print(
            f"# malloc (glibc): blocks up to {MMAP_THRESHOLD >> 20} MiB from the "
            f"heap, {TRIM_THRESHOLD >> 20} MiB kept at its top (steady_allocator)"
        )
    else:
        print("# malloc: not glibc, left as it is")
    print(f"# popcount kernels compiled for: {popcount_instructions()}")
    rates = ", ".join(
        f"{peak / 1e9:.0f} G bit-ops/s per thread on {n} thread{'s' * (n > 1)}"
        for n, peak in peaks.items()
    )
    print(f"# popcount peak (measured): {rates}")
    if max(threads) > 1:
        handoff = handoff_seconds()
        print(f"# thread hand-off (measured): {handoff * 1e6:.0f} us a parallel call")
    return peaks
