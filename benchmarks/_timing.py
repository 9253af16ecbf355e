"""Timing helper shared by the benchmark scripts."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import time


def best_of(fns, repeats, warm=0, settle=0.0):
    """Best wall and CPU time of each function, runs interleaved.

    Interleaving lets every function see the same machine load; the CPU time
    (``time.process_time``) is the steadier number on a shared machine. With
    `warm`, each timed run follows that many untimed runs of the same
    function, so that it finds its own data in the caches (as a server
    running one model over and over does), not what the function before it
    left there. With `settle` (seconds), those untimed runs go on until at
    least that long has passed: the threads another library left spinning
    (torch's OpenMP workers keep a core busy for 20-40 ms after its last
    call with libgomp's default wait policy) are asleep again, while the
    function's own threads stay awake.
    """
    for fn in fns:
        fn()  # warm-up
    wall = [[] for _ in fns]
    cpu = [[] for _ in fns]
    for _ in range(repeats):
        for fn, w, c in zip(fns, wall, cpu):
            start = time.perf_counter()
            done = 0
            while done < warm or (settle and time.perf_counter() - start < settle):
                fn()
                done += 1
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            w.append(time.perf_counter() - t0)
            c.append(time.process_time() - c0)
    return [(min(w), min(c)) for w, c in zip(wall, cpu)]
