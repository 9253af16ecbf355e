"""Streaming: memory of transform/predict over a numpy memmap does not grow with n.

The rule used. Peak memory is measured with :mod:`tracemalloc` (numpy and
Python allocations; the pages of the memmap itself are file-backed and never
traced). The output of ``transform``/``predict`` grows with n by nature (n rows
of packed bytes, n labels), so its size is subtracted: the *working memory*
``peak - output.nbytes`` over 200k rows must stay within 1.5x that over 20k
rows, plus 256 KiB of allocator slack (small numbers measured in KiB jitter by
a few pages). Reading the memmap whole (a float copy of X is 51 MB here) breaks
that by two orders of magnitude.

torch's CPU allocator is not traced; so the net's forward pre-hook also checks
that the net never receives more than ``batch_size`` rows at once.
"""

import tracemalloc

import numpy as np
import pytest
import torch
from torch import nn

from sksign.estimators import SignKNNClassifier
from sksign.transformers import SignCodeTransformer

N_SMALL, N_LARGE = 20_000, 200_000
N_FEATURES = 64
RATIO = 1.5
SLACK = 256 * 1024


def _write_memmap(path, shape, dtype, fill):
    """A .npy file written in blocks, reopened read-only as a memmap."""
    X = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    for start in range(0, shape[0], 50_000):
        stop = min(start + 50_000, shape[0])
        X[start:stop] = fill(stop - start)
    X.flush()
    del X
    return np.load(path, mmap_mode="r")


def _working_memory(func, X):
    """(result, peak traced bytes minus the result's own bytes) of ``func(X)``."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = func(X)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return result, peak - result.nbytes


def _assert_bounded(small, large, what):
    assert large <= RATIO * small + SLACK, (
        f"{what}: working memory grew from {small} B over {N_SMALL} rows to "
        f"{large} B over {N_LARGE} rows (allowed: {RATIO}x + {SLACK} B)"
    )


@pytest.fixture(scope="module")
def X_memmap(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("streaming") / "X.npy"
    return _write_memmap(
        path,
        (N_LARGE, N_FEATURES),
        np.float32,
        lambda n: rng.standard_normal((n, N_FEATURES), dtype=np.float32),
    )


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(N_FEATURES, 32),
        nn.ReLU(),
        nn.Linear(32, 16),
        nn.ReLU(),
        nn.Linear(16, 3),
    )


@pytest.mark.parametrize("output", ["packed", "bits"])
def test_sign_code_transform_memory_bounded_on_memmap(X_memmap, mlp, output):
    """Check that transform's working memory over a memmap does not grow with n."""
    batch_size = 1024
    sct = SignCodeTransformer(
        mlp, layers="all", output=output, batch_size=batch_size
    ).fit(X_memmap[:100])
    sct.transform(X_memmap[:2000])  # warm-up: lazy imports, caches

    seen = []
    handle = sct.estimator_.register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].shape[0])
    )
    try:
        codes_small, small = _working_memory(sct.transform, X_memmap[:N_SMALL])
        codes_large, large = _working_memory(sct.transform, X_memmap)
    finally:
        handle.remove()

    _assert_bounded(small, large, f"SignCodeTransformer(output={output!r})")
    assert large < X_memmap.nbytes / 20
    assert max(seen) <= batch_size
    assert sum(seen) == N_SMALL + N_LARGE
    # streaming changes nothing in the result
    np.testing.assert_array_equal(codes_large[:N_SMALL], codes_small)
    np.testing.assert_array_equal(
        codes_large[-500:], sct.transform(np.asarray(X_memmap[-500:]))
    )


@pytest.fixture(scope="module")
def codes_memmap(tmp_path_factory):
    rng = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("streaming") / "codes.npy"
    return _write_memmap(
        path,
        (N_LARGE, 48),
        np.uint8,
        lambda n: rng.integers(0, 2, size=(n, 48), dtype=np.uint8),
    )


@pytest.fixture(scope="module")
def knn(codes_memmap):
    rng = np.random.default_rng(2)
    y = rng.integers(0, 10, size=2000)
    return SignKNNClassifier(n_neighbors=5, batch_size=4096).fit(
        np.asarray(codes_memmap[:2000]), y
    )


def test_sign_knn_predict_on_memmap_matches_in_memory(knn, codes_memmap):
    """Check that predict on a memmap equals predict on the same rows in memory."""
    rows = codes_memmap[-3000:]
    np.testing.assert_array_equal(knn.predict(rows), knn.predict(np.array(rows)))
    assert not codes_memmap.flags.writeable


def test_sign_knn_predict_memory_bounded_on_memmap(knn, codes_memmap):
    """Check that predict's working memory over a memmap does not grow with n."""
    knn.predict(codes_memmap[:3000])  # warm-up (numba dispatch)
    pred_small, small = _working_memory(knn.predict, codes_memmap[:N_SMALL])
    pred_large, large = _working_memory(knn.predict, codes_memmap)
    np.testing.assert_array_equal(pred_large[:N_SMALL], pred_small)
    _assert_bounded(small, large, "SignKNNClassifier.predict")
