"""Streaming: memory of transform/predict over a memmap or an iterator of batches.

An iterator of batches gives a generator of per-batch results; such a
generator is consumed here keeping only a count and a sum, so the whole peak
must stay flat in n.

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
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
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


# ---------------------------------------------------------------------------
# iterators of batches: a generator in, a generator out
# ---------------------------------------------------------------------------
STREAM_BATCH = 1000


def _row_batches(X, n_rows, size=STREAM_BATCH):
    """Generator of row batches (memmap views, never a copy of X)."""
    for start in range(0, n_rows, size):
        yield X[start : min(start + size, n_rows)]


def _consume(results):
    """Read a generator of per-batch results, keeping only a count and a sum."""
    n, total = 0, 0
    for part in results:
        n += len(part)
        total += int(np.asarray(part, dtype=np.int64).sum())
    return np.array([n, total])


def test_sign_code_transform_streams_an_iterator(X_memmap, mlp):
    """Check transform(iterator): lazy per-batch codes, flat memory, same codes."""
    sct = SignCodeTransformer(mlp, layers="all", output="packed").fit(X_memmap[:100])
    parts = sct.transform(_row_batches(X_memmap, 2500))
    assert not isinstance(parts, np.ndarray)  # a generator, not run yet
    parts = list(parts)
    assert [len(p) for p in parts] == [1000, 1000, 500]
    np.testing.assert_array_equal(
        np.concatenate(parts), sct.transform(np.asarray(X_memmap[:2500]))
    )

    _consume(sct.transform(_row_batches(X_memmap, 3000)))  # warm-up
    res_small, small = _working_memory(
        lambda n: _consume(sct.transform(_row_batches(X_memmap, n))), N_SMALL
    )
    res_large, large = _working_memory(
        lambda n: _consume(sct.transform(_row_batches(X_memmap, n))), N_LARGE
    )
    assert res_small[0] == N_SMALL
    assert res_large[0] == N_LARGE
    _assert_bounded(small, large, "SignCodeTransformer.transform(iterator)")


def test_sign_knn_and_pipeline_stream_an_iterator(X_memmap, mlp, knn, codes_memmap):
    """Check predict(iterator) alone and after SignCodeTransformer in a Pipeline."""
    labels = list(knn.predict(_row_batches(codes_memmap, 2500)))
    assert [len(p) for p in labels] == [1000, 1000, 500]
    np.testing.assert_array_equal(
        np.concatenate(labels), knn.predict(np.asarray(codes_memmap[:2500]))
    )
    proba = list(knn.predict_proba(_row_batches(codes_memmap, 1500)))
    np.testing.assert_array_equal(
        np.concatenate(proba), knn.predict_proba(codes_memmap[:1500])
    )
    assert list(knn.predict(iter([]))) == []

    sct = SignCodeTransformer(mlp, layers="all", output="packed")
    codes = sct.fit_transform(X_memmap[:2000])
    y = np.random.default_rng(3).integers(0, 4, size=2000)
    pipe = make_pipeline(
        sct, SignKNNClassifier(n_neighbors=3, packed=True, n_bits=sct.n_bits_)
    )
    pipe[-1].fit(codes, y)
    streamed = np.concatenate(list(pipe.predict(_row_batches(X_memmap, 4321))))
    np.testing.assert_array_equal(streamed, pipe.predict(X_memmap[:4321]))

    def run(n):
        return _consume(pipe.predict(_row_batches(X_memmap, n)))

    run(3000)  # warm-up
    _res_small, small = _working_memory(run, N_SMALL)
    res_large, large = _working_memory(run, N_LARGE)
    assert res_large[0] == N_LARGE
    _assert_bounded(small, large, "Pipeline.predict(iterator)")


def test_iterator_errors_are_clear_and_lazy(X_memmap, mlp, knn, codes_memmap):
    """Check unfitted (at once), bad batches (when reached), set_output, no harm."""
    with pytest.raises(NotFittedError):
        SignCodeTransformer(mlp).transform(_row_batches(X_memmap, 10))
    with pytest.raises(NotFittedError):
        SignKNNClassifier().predict(_row_batches(codes_memmap, 10))

    sct = SignCodeTransformer(mlp, layers="all").fit(X_memmap[:100])
    before = sct.transform(X_memmap[:50])
    bad = np.array(X_memmap[:10])
    bad[3, 5] = np.nan
    parts = sct.transform(iter([X_memmap[:10], bad]))
    assert next(parts).shape == (10, sct.n_bits_)  # the good batch comes first
    with pytest.raises(ValueError, match="NaN"):
        next(parts)
    with pytest.raises(ValueError, match=f"{N_FEATURES} features"):
        next(sct.transform(iter([X_memmap[:5, :10]])))
    with pytest.raises(ValueError, match=r"set_output.*'pandas'"):
        clone(sct).set_output(transform="pandas").fit(X_memmap[:100]).transform(
            iter([X_memmap[:5]])
        )
    np.testing.assert_array_equal(sct.transform(X_memmap[:50]), before)

    pred = knn.predict(codes_memmap[:50])
    with pytest.raises(ValueError, match="48 features"):
        list(knn.predict(iter([codes_memmap[:5], codes_memmap[:5, :8]])))
    np.testing.assert_array_equal(knn.predict(codes_memmap[:50]), pred)


def test_methods_needing_all_rows_refuse_iterators(X_memmap, mlp, knn, codes_memmap):
    """Check fit, kneighbors, radius_neighbors and score name the iterator problem."""
    batches = _row_batches(codes_memmap, 10)
    y = np.zeros(10, dtype=int)
    for call, method in [
        (lambda: SignKNNClassifier().fit(batches, y), "SignKNNClassifier.fit"),
        (lambda: knn.kneighbors(batches), "SignKNNClassifier.kneighbors"),
        (
            lambda: knn.radius_neighbors(batches, radius=0.1),
            "SignKNNClassifier.radius_neighbors",
        ),
        (lambda: knn.score(batches, y), "SignKNNClassifier.score"),
        (
            lambda: SignCodeTransformer(mlp).fit(_row_batches(X_memmap, 10)),
            "SignCodeTransformer.fit",
        ),
        (
            lambda: SignCodeTransformer(mlp).fit_transform(_row_batches(X_memmap, 10)),
            "SignCodeTransformer.fit",
        ),
    ]:
        with pytest.raises(TypeError, match=f"{method} needs all rows at once"):
            call()
    assert knn.n_samples_fit_ == 2000  # the fitted model is untouched
