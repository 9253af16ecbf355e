"""The process's one worker-thread pool: results, errors, thread bound, fork."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import multiprocessing
import os
import sys
import threading
import time

import numpy as np
import pytest

from sksign._threads import run_in_threads, worker_pool


def test_results_keep_task_order_and_every_task_runs_once():
    calls = []
    out = run_in_threads(
        lambda i: calls.append(i) or i * i, [(i,) for i in range(37)], 3
    )
    assert out == [i * i for i in range(37)]
    assert sorted(calls) == list(range(37))


def test_at_most_n_threads_run_at_once():
    """Check the pool is shared but a call uses at most its `n_threads`."""
    worker_pool(8)  # a pool larger than the call's bound
    lock, active, peak = threading.Lock(), [0], [0]

    def task():
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.01)
        with lock:
            active[0] -= 1

    run_in_threads(task, [()] * 24, n_threads=2)
    assert peak[0] == 2


def test_the_first_error_is_raised_after_every_task_finished():
    done = []

    def task(i):
        if i in (3, 5):
            raise ValueError(f"task {i}")
        time.sleep(0.002)
        done.append(i)

    with pytest.raises(ValueError, match="task 3"):
        run_in_threads(task, [(i,) for i in range(12)], 3)
    assert sorted(done) == [i for i in range(12) if i not in (3, 5)]


def test_one_pool_is_shared_and_grows_on_demand():
    pool = worker_pool(1)
    assert worker_pool(1) is pool
    bigger = worker_pool(pool._max_workers + 1)
    assert bigger._max_workers == pool._max_workers + 1
    assert worker_pool(2) is bigger


def _packed_net():
    from sklearn.datasets import load_digits

    from sksign.deploy import pack
    from sksign.estimators import HTAFNetClassifier

    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    net = HTAFNetClassifier((256, 256), max_epochs=1, random_state=0).fit(X, y)
    return pack(net, n_jobs=2), X


def _in_child(queue, packed, X):
    """After fork: each threaded kernel family once more (as a model server
    does); the parent's pool threads are not here."""
    from sksign.kernels import pack_bits, packed_to_words, words_hamming_distances
    from sksign.nn.activations._htaf_kernel import htaf_forward_f32

    rng = np.random.default_rng(1)
    words = packed_to_words(pack_bits(rng.integers(0, 2, (300, 130), dtype=np.uint8)))
    d = words_hamming_distances(words, words, n_jobs=2)
    x = rng.standard_normal(1 << 18).astype(np.float32)
    y = htaf_forward_f32(x, 2.0, 11.0, n_threads=2)
    labels = packed.predict(X)
    queue.put((int(np.diag(d).sum()), bool(np.isfinite(y).all()), labels.tolist()))


@pytest.mark.skipif(
    not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork()"
)
def test_a_forked_child_runs_the_threaded_kernels():
    """Check that a pool the parent used does not hang a forked child."""
    packed, X = _packed_net()
    here = multiprocessing.Queue()
    _in_child(here, packed, X)  # the parent's pool is live now
    expected = here.get(timeout=5)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(queue, packed, X))
    child.start()
    child.join(timeout=120)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in a threaded kernel")
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected
    assert expected[:2] == (0, True)


def test_a_call_does_not_wait_for_a_helper_still_queued():
    """Check a call on a busy pool runs its tasks itself and returns."""
    pool = worker_pool(2)
    release = threading.Event()
    blockers = [pool.submit(release.wait, 10) for _ in range(pool._max_workers)]
    try:
        t0 = time.perf_counter()
        out = run_in_threads(lambda i: i + 1, [(i,) for i in range(6)], 2)
        took = time.perf_counter() - t0
    finally:
        release.set()
        for f in blockers:
            f.result()
    assert out == list(range(1, 7))
    assert took < 1.0  # not the blockers' 10 s
