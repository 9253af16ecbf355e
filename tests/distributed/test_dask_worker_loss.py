"""A worker lost in the middle of a sharded predict does not change the answer.

The test kills (SIGKILL) the worker process that holds a shard while a
prediction over slow query blocks is running; Dask recomputes the lost shard
from its source array on the remaining (or restarted) worker, and the labels
still equal the single-machine ones.
"""

import os
import signal
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from sksign.estimators import SignKNNClassifier  # noqa: E402


def _slow_copy(block):
    time.sleep(0.25)
    return block.copy()


# A restarted worker process re-imports sksign (and torch) before it rejoins:
# 5-20 s on a loaded 2-core machine, too long for the default run.
@pytest.mark.slow
def test_worker_killed_mid_predict_gives_the_same_labels(client):
    """Check labels after a worker holding a shard dies mid-predict (SIGKILL)."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(600, 130), dtype=np.uint8)
    y = rng.integers(0, 4, size=600)
    Q = rng.integers(0, 2, size=(240, 130), dtype=np.uint8)
    expected = SignKNNClassifier(7, weights="distance").fit(X, y).predict(Q)

    clf = SignKNNClassifier(7, weights="distance")
    clf.fit(da.from_array(X, chunks=((100, 250, 50, 200), 130)), y)
    shards = distributed.futures_of(clf._fit_shards.words)
    holders = {a for ws in client.who_has(shards).values() for a in ws}
    victim = sorted(holders)[0]
    pid = client.run(os.getpid, workers=[victim])[victim]

    queries = da.from_array(Q, chunks=(20, 130)).map_blocks(_slow_copy)
    future = client.compute(clf.predict(queries))
    deadline = time.monotonic() + 30
    while not client.processing()[victim] and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # some blocks done, some running
    assert not future.done()
    os.kill(pid, signal.SIGKILL)
    labels = future.result(timeout=120)
    np.testing.assert_array_equal(labels, expected)
    # the shard of the dead worker was recomputed from the source array
    assert victim not in client.scheduler_info()["workers"]
    np.testing.assert_array_equal(clf.predict(Q), expected)
