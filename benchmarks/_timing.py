"""Timing helper shared by the benchmark scripts."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import time

#: Most rounds :func:`best_of` runs to reach its `min_seconds`.
MAX_ROUNDS = 200


def best_of(fns, repeats, warm=0, settle=0.0, min_seconds=0.0):
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
    function's own threads stay awake. With `min_seconds`, rounds go on past
    `repeats` until every function's timed runs add up to that long (at
    most :data:`MAX_ROUNDS` rounds): the best of 7 runs of a 60 us call
    spans a few milliseconds, which one slow spell of a shared machine
    covers whole (the 1,024-wide sign x sign kernel once read 48% of the
    popcount peak so, against 87-95% in the runs before and after).
    """
    for fn in fns:
        fn()  # warm-up
    wall = [[] for _ in fns]
    cpu = [[] for _ in fns]
    rounds = 0
    while rounds < repeats or (
        rounds < MAX_ROUNDS and min(sum(w) for w in wall) < min_seconds
    ):
        rounds += 1
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
