"""The process's one pool of worker threads, shared by every kernel and safe
across ``fork()``.

The numba and numpy kernels release the GIL, so plain threads run them in
parallel. Starting threads costs more than a small call, so the pool is made
once and kept; a forked child (a pre-forking model server, multiprocessing's
"fork" start method) inherits the pool's bookkeeping but none of its threads,
and waiting on it there would hang forever. :func:`os.register_at_fork` drops
the pool in the child, which starts its own on first use.

Standard library only: :mod:`sksign.nn` (torch, no numba) and
:mod:`sksign.kernels` (numba, no torch) both use it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["run_in_threads", "worker_pool"]

_LOCK = threading.Lock()
_N_CPUS = os.cpu_count() or 1
_POOL: list[ThreadPoolExecutor] = []  # at most one, the current pool


def _forget_pool() -> None:
    """In a forked child: the parent's threads are gone, so is their pool."""
    global _LOCK
    _POOL.clear()
    _LOCK = threading.Lock()  # the parent may have held it at fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def worker_pool(n_workers: int) -> ThreadPoolExecutor:
    """The process's pool, with at least `n_workers` threads.

    A request for more threads than the current pool has replaces it with a
    larger one (the old pool finishes what it was given); otherwise every
    caller shares the same pool, so the threads are started once per process
    (once per child after a ``fork()``).
    """
    n_workers = max(int(n_workers), _N_CPUS)
    pool = _POOL[0] if _POOL else None
    if pool is not None and pool._max_workers >= n_workers:
        return pool  # the common case, without the lock
    with _LOCK:
        if _POOL and _POOL[0]._max_workers >= n_workers:
            return _POOL[0]
        old = _POOL[:]
        _POOL[:] = [ThreadPoolExecutor(max_workers=n_workers)]
    for pool in old:
        pool.shutdown(wait=False)
    return _POOL[0]


def run_in_threads(func, tasks, n_threads: int) -> list:
    """``[func(*t) for t in tasks]`` on at most `n_threads` threads.

    The calling thread works too, beside ``n_threads - 1`` threads of
    :func:`worker_pool`; each takes the next task from one shared list, so a
    thread slowed by other work on its core takes fewer. Every task has
    finished (or raised) when this returns, so none still writes into shared
    outputs after an error; the first error (in task order) is raised. A
    helper still queued when the calling thread has run out of tasks (the
    pool's threads busy with other calls) is cancelled, not waited for.

    Examples
    --------
    >>> from sksign._threads import run_in_threads
    >>> run_in_threads(pow, [(2, 3), (3, 2), (4, 0)], n_threads=2)
    [8, 9, 1]
    """
    tasks = list(tasks)
    if n_threads <= 1 or len(tasks) <= 1:
        return [func(*t) for t in tasks]
    results: list = [None] * len(tasks)
    errors: dict = {}
    todo = iter(range(len(tasks)))  # next() on it is atomic under the GIL

    def work():
        for i in todo:
            try:
                results[i] = func(*tasks[i])
            except BaseException as exc:  # re-raised below, in task order
                errors[i] = exc

    helpers = min(n_threads, len(tasks)) - 1
    pool = worker_pool(helpers)
    futures = [pool.submit(work) for _ in range(helpers)]
    work()
    for f in futures:
        # a helper not started yet (the pool's threads busy elsewhere) would
        # find no task left: no need to wait for a thread to take it
        if not f.cancel():
            f.result()
    if errors:
        raise errors[min(errors)]
    return results
